import pytest


@pytest.fixture
def agents():
    """Agents a test started; any still running at the end are killed (SIGCONT first)."""
    started = []
    yield started
    for a in started:
        a.cleanup()
