"""Outputs belong to one run (issue 29): node 0 holds output_dir's lock for the run's life, so a
second job on the folder exits 2 naming the holder (a dead job's lock is taken over, with a line);
the final outputs are written as a set, and a previous run's weights of the other kind are removed
with a line (overwrite_output_dir) or refused, so transformers never applies a stale adapter."""
import json, os, re, shutil, socket, subprocess, sys, time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
QUICK = ["max_steps=4", "logging_steps=1", "eval_strategy=no", "val_size=0", "plot_loss=false", "save_strategy=no",
         "per_device_train_batch_size=2", "max_samples=16", "cutoff_len=64"]
LOCK = ".lf-train.lock"


def env(**extra):
    e = dict(os.environ, NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    e.pop("NODE_RANK", None)
    e.update(extra)
    return e


def start(out, *args, **extra):
    return subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", *QUICK, *args], cwd=ROOT,
                            env=env(**extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run(out, *args, **extra):
    p = start(out, *args, **extra)
    text = p.communicate(timeout=300)[0]
    return p.returncode, text


def wait_for_lock(out, proc, timeout=60):
    deadline = time.time() + timeout
    while not (out / LOCK).exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.1)
    return json.loads((out / LOCK).read_text())


def test_a_second_job_on_the_same_output_dir_exits_2_naming_the_holder(tmp_path):
    out = tmp_path / "out"
    first = start(out, LF_FAULT_SLEEP="training:8")
    try:
        holder = wait_for_lock(out, first)
        assert holder["pid"] == first.pid and holder["host"] == socket.gethostname(), holder
        rc, text = run(out)
        assert rc == 2, text[-3000:]
        assert f"output_dir {out} is in use by another lf-train job (host {socket.gethostname()}, pid {first.pid}" \
            in text, text[-3000:]
        assert first.wait(120) == 0, first.communicate()[0][-3000:]
    finally:
        if first.poll() is None:
            first.kill()
    assert not (out / LOCK).exists(), "the lock outlived its job"


def test_a_dead_jobs_lock_is_taken_over_with_a_line(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    now = time.time()
    # This host, a pid that is gone.
    (out / LOCK).write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid, "job": "old", "nonce": "n1",
                                        "started": "then", "started_unix": now, "renewed_unix": now}))
    rc, text = run(out)
    assert rc == 0, text[-3000:]
    assert f"taking over the lock of a job that is gone (host {socket.gethostname()}, pid {dead.pid}" in text, text
    assert f"pid {dead.pid} is not running on this host" in text, text
    # Another host's, renewed too long ago (LF_OUTPUT_LOCK_STALE_S), is gone too; a fresh one is not.
    (out / LOCK).write_text(json.dumps({"host": "elsewhere", "pid": 1, "job": "old", "nonce": "n2", "started": "then",
                                        "started_unix": now - 100, "renewed_unix": now - 100}))
    os.utime(out / LOCK, (now - 100, now - 100))  # the file as old as its renewal stamp (both are judged)
    rc, text = run(out, LF_OUTPUT_LOCK_STALE_S="30")
    assert rc == 0 and "not renewed for" in text, text[-3000:]
    (out / LOCK).write_text(json.dumps({"host": "elsewhere", "pid": 1, "job": "busy", "nonce": "n3", "started": "now",
                                        "started_unix": time.time(), "renewed_unix": time.time()}))
    rc, text = run(out, LF_OUTPUT_LOCK_STALE_S="30")
    assert rc == 2 and "is in use by another lf-train job (host elsewhere, pid 1, job 'busy'" in text, text[-3000:]


def test_retries_keep_the_lock_in_the_supervisors_name(tmp_path):
    """Under --retries the supervisor (the process that lives across attempts) holds the lock and
    its attempts adopt it; the lock is renewed while the job runs."""
    out = tmp_path / "out"
    p = start(out, "--retries", "1", LF_FAULT_SLEEP="training:4", LF_OUTPUT_LOCK_STALE_S="1.2")
    try:
        first = wait_for_lock(out, p)
        assert first["pid"] == p.pid, first
        time.sleep(1.5)
        later = json.loads((out / LOCK).read_text())
        assert later["nonce"] == first["nonce"] and later["renewed_unix"] > first["renewed_unix"], (first, later)
        assert p.wait(120) == 0, p.communicate()[0][-3000:]
    finally:
        if p.poll() is None:
            p.kill()


def logits_of(folder):
    """Logits of the first tokens, as transformers loads the folder (AutoModelForCausalLM)."""
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.arange(1, 17).unsqueeze(0)).logits.numpy()


def test_a_full_run_over_a_lora_runs_folder_leaves_no_stale_adapter(tmp_path):
    base = tmp_path / "base"
    rc, text = run(base, "finetuning_type=full")
    assert rc == 0, text[-3000:]
    out = tmp_path / "out"
    rc, text = run(out, "finetuning_type=lora", f"model_name_or_path={base}", "lora_rank=4")
    assert rc == 0 and (out / "adapter_config.json").exists(), text[-3000:]
    rc, text = run(out, "finetuning_type=full", f"model_name_or_path={base}", "overwrite_output_dir=true")
    assert rc == 0, text[-3000:]
    assert "removed files of an earlier run (adapter_config.json, adapter_model.safetensors)" in text, text[-3000:]
    assert not (out / "adapter_config.json").exists() and not (out / "adapter_model.safetensors").exists()
    assert not (out / ".final-outputs.tmp").exists()
    # What transformers loads from the folder is this run's model and nothing else: the same
    # logits as the same weights in a folder of their own.
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(out / name, alone / name)
    np.testing.assert_array_equal(logits_of(str(out)), logits_of(str(alone)))


def test_weights_of_the_other_kind_are_refused_without_overwrite(tmp_path):
    """A resumed full run (overwrite_output_dir: false) in a folder holding an adapter: refused
    before training, naming the files."""
    out = tmp_path / "out"
    rc, text = run(out, "finetuning_type=full", "save_strategy=steps", "save_steps=2")
    assert rc == 0, text[-3000:]
    (out / "adapter_config.json").write_text("{}")
    rc, text = run(out, "finetuning_type=full", "overwrite_output_dir=false", "max_steps=6")
    assert rc == 2, text[-3000:]
    assert f"output_dir {out} holds a file of an earlier LoRA run (adapter_config.json)" in text, text[-3000:]


def test_an_old_sharded_index_is_removed_when_a_single_file_replaces_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                 "model.safetensors.index.json"):
        (out / name).write_text("stale")
    rc, text = run(out, "finetuning_type=full", "overwrite_output_dir=true")
    assert rc == 0, text[-3000:]
    assert "model.safetensors.index.json" in text and "removed files of an earlier run" in text, text[-3000:]
    left = sorted(p.name for p in out.iterdir() if "safetensors" in p.name)
    assert left == ["model.safetensors"], left


def small_disk(tmp_path, megabytes):
    """A tmpfs of its own under tmp_path (root); skips where mounting is not allowed."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(mnt)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    return mnt


def fill_leaving(mnt, free_bytes):
    st = os.statvfs(mnt)
    with open(mnt / "filler", "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - free_bytes))


def run_until_sleep_then(out, log_path, then, *args):
    """A run whose rank 0 sleeps 4 s after its first step; `then()` runs meanwhile."""
    log = open(log_path, "w")
    p = subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", *QUICK, *args], cwd=ROOT,
                         env=env(LF_FAULT_SLEEP="training:4"), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while "LF_FAULT_SLEEP: sleeping" not in open(log_path).read():
            assert p.poll() is None and time.time() < deadline, open(log_path).read()[-3000:]
            time.sleep(0.1)
        then()
        p.wait(300)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, open(log_path).read()


def test_a_disk_that_fills_during_the_run_is_said_in_mib_and_a_failed_save_leaves_no_partial_files(tmp_path):
    """Issue 29: the worker's space rule is the preflight's (a disk preflight passed is refused by
    the worker only when it filled meanwhile), said in MiB for small sizes (it once read "needs
    about 0.00 GiB ... only 0.00 GiB are free"); a final save that hits a full disk removes what it
    wrote (it once left model.safetensors.tmp, and the disk stayed full)."""
    mnt = small_disk(tmp_path, 48)
    try:
        # A checkpoint at step 2 on a disk filled after step 1: refused before writing, in MiB.
        out = mnt / "ckpt"
        rc, text = run_until_sleep_then(out, tmp_path / "a.log", lambda: fill_leaving(mnt, 3 << 20),
                                        "finetuning_type=full", "save_strategy=steps", "save_steps=2")
        assert rc == 2, text[-3000:]
        m = re.search(r"checkpoint-2 needs about ([\d.]+) MiB in \S+ and only ([\d.]+) MiB are free", text)
        assert m and float(m.group(2)) < float(m.group(1)), text[-3000:]
        os.remove(mnt / "filler")
        shutil.rmtree(out)
        # The final save (weights ~4 MiB) on a disk with 1 MiB left: it fails, and leaves nothing partial.
        out = mnt / "final"
        rc, text = run_until_sleep_then(out, tmp_path / "b.log", lambda: fill_leaving(mnt, 1 << 20),
                                        "finetuning_type=full")
        assert rc != 0 and "disk full?" in text, text[-3000:]
        left = [str(p) for p in out.rglob("*") if p.name.endswith(".tmp") or ".final-outputs.tmp" in str(p)]
        assert not left, left
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
