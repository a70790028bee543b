"""Checkpoint format versions (issue 12): a checkpoint written before format versions existed
(tests/fixtures/ckpt/v1_lora: format 1, one writer, whole-tensor optimizer state) resumes with
today's lf-train and ends where the run that wrote it ended; a newer format is refused naming the
version; the per-rank commit leaves no checkpoint when a rank dies before reporting its files."""
import json, os, shutil, subprocess, sys

import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(__file__))
from train_runs import LF_TRAIN, ROOT, free_port  # noqa: E402

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "ckpt", "v1_lora")
ARGS = ["tests/fixtures/train/bitwise_tiny_cpu.yaml", "finetuning_type=lora", "lora_rank=4", "max_steps=4",
        "save_steps=2", "logging_steps=1", "eval_strategy=no", "val_size=0", "plot_loss=false"]


def lf_train(*args, nproc=1, env_extra=None):
    env = dict(os.environ, NPROC_PER_NODE=str(nproc), MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
               **(env_extra or {}))
    return subprocess.run([LF_TRAIN, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_format_1_checkpoint_resumes_as_if_uninterrupted(tmp_path):
    ckpt = tmp_path / "checkpoint-2"
    shutil.copytree(os.path.join(FIXTURE, "checkpoint-2"), ckpt)
    assert "format_version" not in json.load(open(ckpt / "lf_trainer_state.json"))
    p = lf_train(*ARGS, f"output_dir={tmp_path / 'out'}", f"resume_from_checkpoint={ckpt}")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    got = [json.loads(l)["loss"] for l in open(tmp_path / "out" / "trainer_log.jsonl") if '"loss"' in l]
    want = [json.loads(l)["loss"] for l in open(os.path.join(FIXTURE, "trainer_log.jsonl")) if '"loss"' in l]
    assert len(got) == 2 and np.allclose(got, want[2:4], rtol=1e-6, atol=0), (got, want)
    a = load_file(str(tmp_path / "out" / "adapter_model.safetensors"))
    b = load_file(os.path.join(FIXTURE, "final_adapter_model.safetensors"))
    assert a.keys() == b.keys()
    for k in b:
        assert float(np.max(np.abs(a[k] - b[k]))) <= 1e-6, k
    # what today's lf-train writes carries the format
    saved = json.load(open(tmp_path / "out" / "checkpoint-4" / "lf_trainer_state.json"))
    assert saved["format_version"] == 2


def test_a_newer_format_is_refused_naming_it(tmp_path):
    ckpt = tmp_path / "checkpoint-2"
    shutil.copytree(os.path.join(FIXTURE, "checkpoint-2"), ckpt)
    state = json.load(open(ckpt / "lf_trainer_state.json"))
    state["format_version"] = 99
    json.dump(state, open(ckpt / "lf_trainer_state.json", "w"))
    os.remove(ckpt / "lf_manifest.json")  # else the edit is (rightly) refused as damage first
    p = lf_train(*ARGS, f"output_dir={tmp_path / 'out'}", f"resume_from_checkpoint={ckpt}")
    text = p.stdout + p.stderr
    assert p.returncode == 2, text[-3000:]
    assert "checkpoint format 99, newer than this lf-train reads (up to 2)" in text, text[-3000:]


def test_a_rank_that_dies_before_reporting_durable_leaves_no_checkpoint(tmp_path):
    """Two ranks under ZeRO-2 (each writes its own optimizer file): rank 1 exits with its file durable
    but unreported at the first save. The job fails, checkpoint-2 never appears, and the next run
    removes the temporary folder and starts fresh."""
    out = tmp_path / "out"
    p = lf_train(*ARGS, f"output_dir={out}", "zero_stage=2", "per_device_train_batch_size=4", nproc=2,
                 env_extra={"LF_FAULT_CKPT_EXIT_RANK": "1"})
    text = p.stdout + p.stderr
    assert p.returncode != 0, text[-3000:]
    assert "exiting before reporting the checkpoint durable" in text, text[-3000:]
    assert not (out / "checkpoint-2").exists(), os.listdir(out)
    assert (out / ".checkpoint-2.tmp" / "optimizer-rank1.safetensors").exists(), os.listdir(out)
    p = lf_train(*ARGS, f"output_dir={out}", "overwrite_output_dir=true", "max_steps=2")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "removed 1 unfinished checkpoint folder" in p.stdout + p.stderr
    assert (out / "checkpoint-2").exists() and not (out / ".checkpoint-2.tmp").exists()


def test_resuming_under_another_global_batch_says_what_the_step_means(tmp_path):
    """Issue 19: a checkpoint of global batch 8 resumed with micro-batch 2 (global batch 4): the run
    goes on (as HF: the step count is kept) and says once what the resumed step means."""
    out = tmp_path / "out"
    p = lf_train(*ARGS, f"output_dir={out}", "per_device_train_batch_size=8")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    p = lf_train(*ARGS, f"output_dir={tmp_path / 'again'}", "per_device_train_batch_size=4",
                 f"resume_from_checkpoint={out / 'checkpoint-2'}")
    text = p.stdout + p.stderr
    assert p.returncode == 0, text[-3000:]
    assert text.count("was written with a global batch of 8 examples a step") == 1, text[-3000:]
    assert "this run's is 4" in text and "resumes after step 2 of the new schedule's 4" in text, text[-3000:]


def test_a_checkpoint_that_cannot_fit_fails_before_it_writes(tmp_path):
    """Issue 19: a full disk mid-save left a torn .checkpoint-N.tmp and a rerun failed at the same
    step. On a filesystem with room for one checkpoint and not two, the second save is refused
    before anything is written, naming the sizes (exit 2, no temporary folder left)."""
    probe = tmp_path / "probe"
    p = lf_train(*ARGS, f"output_dir={probe}", "finetuning_type=full", "max_steps=2")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    one = sum(f.stat().st_size for f in (probe / "checkpoint-2").iterdir())
    disk = tmp_path / "disk"
    disk.mkdir()
    size_kb = int(one * 1.6 / 1024) + 2048  # one checkpoint and the run's other files fit, two do not
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(disk)], check=True)
    try:
        out = disk / "out"
        p = lf_train(*ARGS, f"output_dir={out}", "finetuning_type=full", "max_steps=4")
        text = p.stdout + p.stderr
        assert p.returncode == 2, text[-3000:]
        assert "checkpoint-4 needs about" in text, text[-3000:]
        assert (out / "checkpoint-2").exists() and not (out / ".checkpoint-4.tmp").exists(), os.listdir(out)
    finally:
        subprocess.run(["umount", str(disk)], check=False)
