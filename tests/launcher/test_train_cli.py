"""`lf-train CONFIG.yaml [key=value ...]`: validated before any node waits, then every worker runs
`lf-worker train CONFIG key=value ...` under the agent. lf-worker is stood in for by a script here
(LF_WORKER_BIN), so this tests the launcher's side only."""
import os, shutil, subprocess

import pytest

from harness import LF_TRAIN, Agent, free_port

FAKE_WORKER = os.path.join(os.path.dirname(__file__), "progs", "fake_worker.sh")
TINY_CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "models", "tiny", "config.json")


def write_config(tmp_path, extra="", name="cfg.yaml"):
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    shutil.copy(TINY_CONFIG, model / "config.json")  # lf-train checks the architecture before the rendezvous
    cfg = tmp_path / name
    cfg.write_text(f"model_name_or_path: {model}\ndataset: alpaca_demo\nreport_to: wandb\n{extra}")
    return cfg


def run(args, env=None):
    e = dict(os.environ, LF_WORKER_BIN=FAKE_WORKER, MASTER_PORT=str(free_port()))
    e.update(env or {})
    return subprocess.run([LF_TRAIN, *args], capture_output=True, text=True, env=e, timeout=60)


def test_config_runs_lf_worker_train_with_the_overrides_on_every_worker(tmp_path):
    cfg = write_config(tmp_path)
    for form in ([str(cfg)], ["train", str(cfg)]):
        r = run(form + ["learning_rate=1e-4", "lora_rank=16"], env={"NPROC_PER_NODE": "2"})
        assert r.returncode == 0, r.stderr
        assert r.stdout.count(f"WORKER_ARGS train {cfg} learning_rate=1e-4 lora_rank=16") == 2, r.stdout
        assert "WORKER_RANK 0/2" in r.stdout and "WORKER_RANK 1/2" in r.stdout
        assert "`report_to: wandb` has no effect" in r.stderr


def test_bad_config_fails_before_spawning_anything(tmp_path):
    cfg = write_config(tmp_path, "lora_rnak: 4\nneftune_noise_alpha: 5\n")
    r = run([str(cfg)])
    assert r.returncode == 2
    assert "unknown key `lora_rnak`: did you mean lora_rank?" in r.stderr
    assert "`neftune_noise_alpha: 5` is refused" in r.stderr
    assert "WORKER_ARGS" not in r.stdout


def test_model_that_is_not_a_local_folder_says_how_to_download(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ndataset: x\n")
    r = run([str(cfg)])
    assert r.returncode == 2
    assert "huggingface-cli download Qwen/Qwen2.5-7B-Instruct" in r.stderr


def test_missing_config_and_bad_override(tmp_path):
    r = run([str(tmp_path / "nope.yaml")])
    assert r.returncode == 2 and "cannot read config" in r.stderr
    r = run([str(write_config(tmp_path)), "learning_rate"])
    assert r.returncode == 2 and "is not key=value" in r.stderr


def test_nodes_with_different_effective_configs_are_refused(tmp_path):
    cfg = write_config(tmp_path)
    port = free_port()
    env = {"LF_WORKER_BIN": FAKE_WORKER, "NNODES": "2", "MASTER_PORT": str(port)}
    n0 = Agent([str(cfg), "seed=1"], env=dict(env, NODE_RANK="0"), tmp=str(tmp_path))
    n1 = Agent([str(cfg), "seed=2"], env=dict(env, NODE_RANK="1"), tmp=str(tmp_path))
    try:
        assert n0.wait(20) == 10 and n1.wait(20) == 10
        assert "command/config mismatch" in n1.err
    finally:
        n0.cleanup()
        n1.cleanup()


def test_more_workers_than_visible_gpus_is_an_error(tmp_path):
    cfg = write_config(tmp_path)
    r = run([str(cfg)], env={"CUDA_VISIBLE_DEVICES": "0,2", "NPROC_PER_NODE": "3"})
    assert r.returncode == 2
    assert "more workers than the 2 visible GPU(s) (CUDA_VISIBLE_DEVICES=0,2)" in r.stderr
    assert "WORKER_ARGS" not in r.stdout


def test_one_worker_per_visible_gpu_by_default(tmp_path):
    cfg = write_config(tmp_path)
    env = {"CUDA_VISIBLE_DEVICES": "0,2,3"}
    e = dict(os.environ, LF_WORKER_BIN=FAKE_WORKER, MASTER_PORT=str(free_port()), **env)
    e.pop("NPROC_PER_NODE", None)
    r = subprocess.run([LF_TRAIN, str(cfg)], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(l for l in r.stdout.splitlines() if "WORKER_RANK" in l) == [
        f"[rank {i}] WORKER_RANK {i}/3" for i in range(3)]


def test_deepspeed_file_is_read_before_any_node_waits(tmp_path):
    """issue 19: `deepspeed: does_not_exist.json` was accepted; a train_batch_size that the world
    size cannot give fails on the launching node, before the rendezvous, when the world is fixed."""
    r = run([str(write_config(tmp_path, "deepspeed: does_not_exist.json\n"))])
    assert r.returncode == 2 and "`deepspeed: does_not_exist.json`: no such file" in r.stderr, r.stderr
    ds = tmp_path / "ds.json"
    ds.write_text('{"train_batch_size": 6, "zero_optimization": {"stage": 2}}')
    cfg = write_config(tmp_path, f"deepspeed: {ds}\nper_device_train_batch_size: 1\n", name="ds.yaml")
    r = run([str(cfg)], env={"NPROC_PER_NODE": "2"})
    assert r.returncode == 2 and "train_batch_size 6, but per_device_train_batch_size 1" in r.stderr, r.stderr
    assert "WORKER_ARGS" not in r.stdout
    r = run([str(cfg)], env={"NPROC_PER_NODE": "6"})  # 1 x 1 x 6 ranks = 6: it holds
    assert r.returncode == 0, r.stderr


def test_a_config_key_given_as_a_flag_gets_the_key_value_hint(tmp_path):
    """`lf-train CONFIG --learning_rate 1e-4` (issue 29: it once said only "arguments were not
    expected")."""
    cfg = write_config(tmp_path)
    for form, shown in ((["--learning_rate", "1e-4"], "--learning_rate 1e-4"),
                        (["--learning-rate=1e-4"], "--learning-rate=1e-4")):
        r = run([str(cfg), *form])
        assert r.returncode == 2, r.stderr
        assert f"`{shown}`: config keys are given after the config as key=value, not as flags: write " \
               "learning_rate=1e-4" in r.stderr, r.stderr
