"""`lf-train CONFIG` checks on every node, before the rendezvous, what would otherwise fail after
the model loaded (or after every node waited): the model folder (architecture, complete
safetensors, where the initial weights come from), the output folder (writable, room for a
checkpoint), and checkpoints that overwrite_output_dir discards. lf-worker is stood in for by a
script (LF_WORKER_BIN): nothing here needs libtorch."""
import json, os, shutil, struct, subprocess

from harness import LF_TRAIN, Agent, free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FAKE_WORKER = os.path.join(os.path.dirname(__file__), "progs", "fake_worker.sh")
TINY = os.path.join(ROOT, "configs", "models", "tiny")


def model_folder(tmp_path, name="model", weights=False, config=None):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    shutil.copy(os.path.join(TINY, "config.json"), d / "config.json")
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    if weights:
        header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
        (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    return d


def write_config(tmp_path, model, extra=""):
    """`extra` YAML lines override the defaults (a key given twice in one file is an error)."""
    cfg = tmp_path / "cfg.yaml"
    keys = {"model_name_or_path": str(model), "dataset": "alpaca_demo", "output_dir": str(tmp_path / "out")}
    for line in extra.splitlines():
        if line.strip():
            k, v = line.split(":", 1)
            keys[k.strip()] = v.strip()
    cfg.write_text("".join(f"{k}: {v}\n" for k, v in keys.items()))
    return cfg


def run(args, env=None, prefix=()):
    e = dict(os.environ, LF_WORKER_BIN=FAKE_WORKER, MASTER_PORT=str(free_port()))
    e.pop("NNODES", None)
    e.update(env or {})
    return subprocess.run([*prefix, LF_TRAIN, *args], capture_output=True, text=True, env=e, timeout=60)


def test_a_folder_without_weights_starts_from_random_weights_and_says_so_once(tmp_path):
    cfg = write_config(tmp_path, model_folder(tmp_path))
    r = run([str(cfg)], env={"NPROC_PER_NODE": "2"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("holds no weights (config.json only): the model starts from random weights") == 1, r.stderr
    assert r.stdout.count("WORKER_ARGS") == 2


def test_init_weights_random_says_that_the_folders_weights_are_ignored(tmp_path):
    cfg = write_config(tmp_path, model_folder(tmp_path, weights=True), "init_weights: random\n")
    r = run([str(cfg)])
    assert r.returncode == 0, r.stderr
    assert "init_weights: random: the weights in" in r.stderr and "model.safetensors" in r.stderr, r.stderr
    assert "are ignored" in r.stderr


def test_the_tiny_config_trains_the_weights_of_a_folder_it_is_pointed_at(tmp_path):
    """The shipped tiny config sets no init_weights: pointed at a folder with weights, it
    fine-tunes them (it once trained random weights there without a word)."""
    model = model_folder(tmp_path, weights=True)
    r = run([os.path.join(ROOT, "configs", "tiny_cpu.yaml"), f"model_name_or_path={model}",
             f"output_dir={tmp_path / 'out'}"])
    assert r.returncode == 0, r.stderr
    assert "random" not in r.stderr, r.stderr


def test_init_weights_pretrained_needs_weights(tmp_path):
    cfg = write_config(tmp_path, model_folder(tmp_path), "init_weights: pretrained\n")
    r = run([str(cfg)])
    assert r.returncode == 2 and "init_weights: pretrained, but model folder" in r.stderr, r.stderr
    assert "WORKER_ARGS" not in r.stdout


def test_a_truncated_safetensors_fails_before_any_worker_starts(tmp_path):
    model = model_folder(tmp_path, weights=True)
    data = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(data[:-5])
    r = run([str(write_config(tmp_path, model))])
    assert r.returncode == 2, r.stderr
    assert "corrupt or truncated safetensors file" in r.stderr and "model.safetensors" in r.stderr, r.stderr
    assert "WORKER_ARGS" not in r.stdout


def test_a_half_downloaded_folder_is_an_error(tmp_path):
    model = model_folder(tmp_path)
    (model / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (model / ".cache" / "huggingface" / "download" / "abc.incomplete").write_text("x")
    r = run([str(write_config(tmp_path, model))])
    assert r.returncode == 2 and "download broke off" in r.stderr, r.stderr


def test_an_unsupported_architecture_fails_before_any_worker_starts(tmp_path):
    conf = json.load(open(os.path.join(TINY, "config.json")))
    conf["architectures"], conf["model_type"] = ["GPT2LMHeadModel"], "gpt2"
    r = run([str(write_config(tmp_path, model_folder(tmp_path, config=conf)))])
    assert r.returncode == 2 and "GPT2LMHeadModel" in r.stderr, r.stderr
    assert "WORKER_ARGS" not in r.stdout


def test_download_hint_names_a_real_repository_id(tmp_path):
    cfg = write_config(tmp_path, "models/Qwen2.5-7B-Instruct")
    r = run([str(cfg)])
    assert r.returncode == 2
    assert "huggingface-cli download Qwen/Qwen2.5-7B-Instruct --local-dir models/Qwen2.5-7B-Instruct" in r.stderr, \
        r.stderr


def test_a_read_only_output_dir_fails_before_any_worker_starts(tmp_path):
    out = tmp_path / "ro"
    out.mkdir()
    cfg = write_config(tmp_path, model_folder(tmp_path), f"output_dir: {out}/run\n")
    ro = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
          f'mount -t tmpfs -o ro lf-ro "{out}" && exec "$0" "$@"']
    r = run([str(cfg)], prefix=ro)
    assert r.returncode == 2, r.stderr
    assert f"output_dir {out}/run cannot be written" in r.stderr and "read-only filesystem" in r.stderr, r.stderr
    assert "WORKER_ARGS" not in r.stdout


def test_an_output_dir_without_room_for_a_checkpoint_fails_before_any_worker_starts(tmp_path):
    out = tmp_path / "small"
    out.mkdir()
    cfg = write_config(tmp_path, model_folder(tmp_path), f"output_dir: {out}\nfinetuning_type: full\n")
    small = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             f'mount -t tmpfs -o size=1m lf-small "{out}" && exec "$0" "$@"']
    r = run([str(cfg)], prefix=small)
    assert r.returncode == 2, r.stderr
    assert "free, but one checkpoint of this run needs about" in r.stderr, r.stderr


def test_overwrite_output_dir_names_the_checkpoints_it_discards(tmp_path):
    out = tmp_path / "out"
    for step in (40, 80):
        (out / f"checkpoint-{step}").mkdir(parents=True)
    cfg = write_config(tmp_path, model_folder(tmp_path), "overwrite_output_dir: true\n")
    r = run([str(cfg)], env={"NPROC_PER_NODE": "2"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("checkpoint(s) at step(s) 40, 80 are not resumed") == 1, r.stderr


def test_config_mismatch_between_nodes_names_the_keys_and_both_values(tmp_path):
    cfg = write_config(tmp_path, model_folder(tmp_path), "hub_token: tok-secret-A1\n")
    port = free_port()
    env = {"LF_WORKER_BIN": FAKE_WORKER, "NNODES": "2", "MASTER_PORT": str(port)}
    n0 = Agent([str(cfg), "seed=1"], env=dict(env, NODE_RANK="0"), tmp=str(tmp_path))
    n1 = Agent([str(cfg), "seed=2", "learning_rate=1e-4", "hub_token=tok-secret-B2"], env=dict(env, NODE_RANK="1"),
               tmp=str(tmp_path))
    try:
        assert n0.wait(20) == 10 and n1.wait(20) == 10
        for n in (n0, n1):
            assert "command/config mismatch: " in n.err, n.err
            # which node is named first depends on who joined first
            assert "seed: '" in n.err and "'1' on node rank 0" in n.err and "'2' on node rank 1" in n.err, n.err
            assert "learning_rate: " in n.err and "(not set) on node rank 0" in n.err, n.err
            assert "hub_token: (a different secret)" in n.err, n.err
            mismatch = [l for l in n.err.splitlines() if "command/config mismatch" in l]
            assert mismatch and not any("tok-secret" in l for l in mismatch), mismatch
    finally:
        n0.cleanup()
        n1.cleanup()
