"""lf-train's TensorBoard event files read back by TensorBoard's own reader (the `tensorboard`
package's EventAccumulator, as `tensorboard --logdir` reads them): every scalar tfevents_test's
ScalarLog.FileForTheTensorBoardReader wrote, with HF's tags, steps and float32 values. (A
training run's file: tests/train/test_observe.py.)"""
import os, subprocess

import numpy as np
import pytest

TEST_BIN = os.environ.get("LF_TFEVENTS_TEST_BIN", "")


def test_every_scalar_is_read_back(tmp_path):
    if not TEST_BIN:
        pytest.skip("LF_TFEVENTS_TEST_BIN not set (run through ctest)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = subprocess.run([TEST_BIN, "--gtest_filter=ScalarLog.FileForTheTensorBoardReader"],
                         env=dict(os.environ, LF_TFEVENTS_DUMP_DIR=str(tmp_path)), capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    if "built without protobuf" in run.stdout:
        pytest.fail("lf_tfevents was built without protobuf: scripts/install_deps.sh installs libprotobuf-dev")
    (logdir,) = list((tmp_path / "runs").iterdir())
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    got = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    want = {
        "train/loss": [(s, 2.5 - 0.25 * s) for s in range(1, 6)],
        "train/learning_rate": [(s, 1e-4 * s) for s in range(1, 6)],
        "train/grad_norm": [(s, 0.1 + s / 3.0) for s in range(1, 6)],
        "train/epoch": [(s, s / 5.0) for s in range(1, 6)],
        "train/throughput": [(s, 1000.0 + s) for s in range(1, 6)],
        "train/total_tokens": [(s, 512.0 * s) for s in range(1, 6)],
        "eval/loss": [(5, 1.75)],
        "eval/runtime": [(5, 0.125)],
    }
    assert sorted(got) == sorted(want), sorted(got)
    for tag, points in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag
        # TensorBoard stores simple_value as float32: equal to the value rounded to float32.
        assert [np.float32(v) for _, v in got[tag]] == [np.float32(v) for _, v in points], (tag, got[tag])
    events = acc.Scalars("train/loss")
    assert all(e.wall_time > 1.7e9 for e in events), events
