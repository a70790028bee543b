"""What a new user or a torchrun user tries first: the usage, a subcommand that does not
exist, `lf-train launch -- train.py`, torchrun's rendezvous flags."""
import os, subprocess

from harness import LF_TRAIN, PY, WORKER, Agent, free_port

ENV_SCRIPT = """import json, os
print("ENV " + json.dumps({k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_PORT")}), flush=True)
"""


def run(args, cwd=None, timeout=60):
    env = dict(os.environ)
    env.pop("NNODES", None)
    return subprocess.run([LF_TRAIN, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def test_usage_names_the_program_and_the_training_form_first():
    r = run([])
    assert r.returncode == 2
    first = r.stdout.splitlines()[1]
    assert first.startswith("Usage: lf-train CONFIG.yaml [key=value ...]"), r.stdout
    assert "lf-train SUBCOMMAND" in r.stdout and "launch" in r.stdout and "preview" in r.stdout
    r = run(["launch", "--help"])
    assert r.returncode == 0 and "--rdzv-endpoint" in r.stdout and "--no-python" in r.stdout, r.stdout


def test_an_unknown_subcommand_says_which_exist(tmp_path):
    r = run(["export", "cfg.yaml"])
    assert r.returncode == 2
    assert "'export' is not an lf-train subcommand; the subcommands are " in r.stderr, r.stderr
    for name in ("train", "launch", "rdzv-server", "preview", "tokenize"):
        assert name in r.stderr
    r = run(["lanch", "--", "true"])
    assert r.returncode == 2 and "(did you mean launch?)" in r.stderr, r.stderr
    cfg = tmp_path / "job.cfg"
    cfg.write_text("x: 1\n")
    r = run([str(cfg)])
    assert r.returncode == 2 and "whose name ends in .yaml, .yml or .json" in r.stderr, r.stderr


def test_a_py_script_in_the_current_folder_runs_with_python_as_in_torchrun(tmp_path):
    (tmp_path / "train.py").write_text(ENV_SCRIPT)  # no shebang, not executable
    r = run(["launch", "--standalone", "--nproc_per_node", "2", "--", "train.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ENV {") == 2 and '"WORLD_SIZE": "2"' in r.stdout, r.stdout
    r = run(["launch", "--standalone", "--no_python", "--", "train.py"], cwd=tmp_path)
    assert r.returncode == 2 and "'train.py' not found in PATH" in r.stderr, r.stderr


def test_torchrun_rendezvous_flags_map_onto_lf_trains_own(tmp_path, agents):
    port = free_port()
    args = ["launch", "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", "trjob", "--", PY, WORKER]
    a, b = Agent(args, tmp=str(tmp_path)), Agent(args, tmp=str(tmp_path))
    agents += [a, b]
    assert a.wait(30) == 0 and b.wait(30) == 0, a.err + b.err
    envs = {**a.envs(), **b.envs()}
    assert sorted(envs) == [0, 1]
    assert {e["LF_RDZV_PORT"] for e in envs.values()} == {str(port)}
    assert {e["TORCHELASTIC_RUN_ID"] for e in envs.values()} == {"trjob"}


def test_torchrun_flags_that_cannot_apply_are_refused_with_why():
    r = run(["launch", "--rdzv_backend", "etcd", "--", "true"])
    assert r.returncode == 2 and "etcd is not supported" in r.stderr, r.stderr
    r = run(["launch", "--standalone", "--nnodes", "2", "--", "true"])
    assert r.returncode == 2 and "--standalone is a single-node job" in r.stderr, r.stderr
    r = run(["launch", "--rdzv-endpoint", "host:notaport", "--", "true"])
    assert r.returncode == 2 and "expected HOST[:PORT]" in r.stderr, r.stderr
    r = run(["launch", "--rdzv-endpoint", "127.0.0.1:1234", "--master-port", "999", "--", "true"])
    assert r.returncode == 2 and "name different ports" in r.stderr, r.stderr
