"""`lf-train env` / `--help-env` / `keys`, and LF_* values that do not parse: exit 2 with the variable named."""
import os
import subprocess

from harness import LF_TRAIN

EXIT_CONFIG = 2


def run(*args, env=None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([LF_TRAIN, *args], env=full, capture_output=True, text=True, timeout=30)


def test_env_lists_every_knob_with_the_value_set_now():
    r = run("env", env={"LF_JOB_TOKEN": "s3cret-for-test"})
    assert r.returncode == 0, r.stderr
    for name in ("LF_LOG_LEVEL", "LF_JOB_TOKEN", "LF_RDZV_PORT", "LF_PROGRESS_STEP_FACTOR", "LF_COMM_CHECK"):
        assert name in r.stdout
    assert "LF_JOB_TOKEN (text; default unset; read by lf-train, lf-worker) = 's3cret-for-test'" in r.stdout
    assert run("--help-env").stdout == run("env").stdout


def test_markdown_has_no_current_values():
    r = run("env", "--markdown", env={"LF_JOB_TOKEN": "s3cret-for-test"})
    assert r.returncode == 0 and r.stdout.startswith("| variable |")
    assert "s3cret-for-test" not in r.stdout


def test_keys_lists_policies():
    r = run("keys")
    assert r.returncode == 0, r.stderr
    assert "cutoff_len [implemented] integer (default `2048`)" in r.stdout
    assert "neftune_noise_alpha [refused unless default]" in r.stdout
    assert "quantization_bit [implemented]" in r.stdout
    assert "zero_optimization.stage [implemented]" in r.stdout
    assert "fsdp: hybrid_shard [refused]" in r.stdout


def test_a_malformed_log_level_is_a_config_error():
    r = run("--version", env={"LF_LOG_LEVEL": "verbose"})
    assert r.returncode == EXIT_CONFIG
    assert "LF_LOG_LEVEL='verbose': expected one of trace|debug|info" in r.stderr
