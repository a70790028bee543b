"""`lf-train plan CONFIG [key=value ...] [--json]`: what a job will run, resolved from its plan
without running it (issue 28). Numbers are checked against arithmetic done here from the
config files, not against the memory model's own code."""
import json, math, os, shutil, subprocess

from harness import LF_TRAIN, free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FAKE_WORKER = os.path.join(os.path.dirname(__file__), "progs", "fake_worker.sh")


def plan(args, env=None, json_out=True):
    e = {k: v for k, v in os.environ.items() if k not in ("NNODES", "NPROC_PER_NODE", "CUDA_VISIBLE_DEVICES")}
    e["CUDA_VISIBLE_DEVICES"] = ""  # one rank per node unless told otherwise, GPUs or not
    e.update(env or {})
    r = subprocess.run([LF_TRAIN, "plan", *args] + (["--json"] if json_out else []), capture_output=True, text=True,
                       env=e, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if json_out else r.stdout


def qwen2_parameters(c):
    """Qwen2's parameter count from config.json: embedding, layers (q/k/v with biases), norm, head."""
    h, i, v, n = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    hd = c.get("head_dim", h // c["num_attention_heads"])
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + q + 2 * kv
    return v * h * (1 if c.get("tie_word_embeddings") else 2) + n * layer + h, layer


def term(summary, kind, side="gpu_per_rank"):
    return sum(t["bytes"] for t in summary["memory"][side]["terms"] if t["kind"] == kind)


def test_tiny_cpu_plan_numbers_and_data_counts():
    cfg = json.load(open(os.path.join(ROOT, "configs/models/tiny/config.json")))
    s = plan(["configs/tiny_cpu.yaml"])
    params, layer = qwen2_parameters(cfg)
    assert s["model"]["parameters"] == params and s["model"]["trainable"] == params
    # tiny_cpu.yaml: per_device_train_batch_size 8, gradient_accumulation_steps 1, one rank.
    assert s["world"] == {"nnodes": 1, "nproc_per_node": 1, "world_size": 1}
    assert s["batch"]["global_batch"] == 8
    assert s["parallel"]["strategy"] == "one process"
    units = s["units"]
    assert [u["name"] for u in units] == ["embedding", f"layers 0-{cfg['num_hidden_layers'] - 1}", "head"]
    assert units[1]["count"] == cfg["num_hidden_layers"] and units[1]["params"] == layer
    # fp32 full fine-tuning: 4 bytes of weights and 8 of AdamW moments a parameter.
    assert term(s, "master") == 4 * params and term(s, "moments") == 8 * params
    assert s["precision"]["compute"] == "fp32" and s["memory"]["host_per_rank"]["bytes"] == 0
    # Activations without checkpointing (fp32): per token per layer 4 [C] + 2 [q] + 2 [kv] + 3 [I] values
    # and the heads' fp32 log-sum-exp; 8 rows of cutoff_len 256 tokens.
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    hd = cfg.get("head_dim", h // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    per_token = 4 * (4 * h + 2 * q + 2 * kv + 3 * i) + 4 * cfg["num_attention_heads"]
    assert term(s, "activations") == cfg["num_hidden_layers"] * 8 * 256 * per_token
    # The data pipeline's counts: alpaca_en_demo (300) + identity (40), val_size 0.05 held out.
    d = s["data"]
    assert d["train_examples"] + d["eval_examples"] == 340, d
    assert d["eval_examples"] == math.ceil(0.05 * 340), d
    assert d["train_tokens"] > d["train_examples"]
    text = plan(["configs/tiny_cpu.yaml", "--no-data"], json_out=False)
    assert "  batch          global 8 = 8 per device x 1 accumulation x 1 rank(s); rows of 256 tokens" in text, text
    assert "  parallel       one process" in text and "  gpu / rank     peak " in text, text
    assert "  data" not in text, text


def qwen7b_folder(tmp_path):
    """configs/qwen2.5-7b.json as a model folder's config.json: no tokenizer, no weights."""
    model = tmp_path / "qwen7b"
    model.mkdir()
    shutil.copy(os.path.join(ROOT, "configs/models/qwen2.5-7b.json"), model / "config.json")
    return model


def test_qwen7b_zero3_offload_from_config_json_alone(tmp_path):
    model = qwen7b_folder(tmp_path)
    args = ["configs/qwen7b.yaml", f"model_name_or_path={model}",
            "deepspeed=tests/fixtures/config/ds_z3_offload_config.json"]
    s = plan(args)
    cfg = json.load(open(model / "config.json"))
    params, _ = qwen2_parameters(cfg)
    h, i, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    kv = cfg["num_key_value_heads"] * (h // cfg["num_attention_heads"])
    # qwen7b.yaml: LoRA rank 8 on all seven projections.
    lora = n * 8 * ((h + h) + 2 * (h + kv) + (h + h) + 3 * (h + i))
    assert s["model"]["parameters"] == params and s["model"]["trainable"] == lora
    z = s["parallel"]["zero"]
    assert s["parallel"]["zero_stage"] == 3 and s["parallel"]["strategy"] == "ZeRO-3"
    assert z["offload"] == "params" and z["pin_memory"] is True  # offload_param: cpu
    # Every unit offloaded (ratio 1): 16 bytes a trainable parameter in host memory, none of the state on the GPU.
    assert s["memory"]["host_per_rank"]["bytes"] == 16 * lora
    assert term(s, "moments") == 0 and term(s, "master") == 0
    # The frozen base is sharded (one rank: all of it), the units gathered in bf16.
    assert term(s, "weights") == 2 * params
    assert s["batch"]["global_batch"] == 1 * 8 * 1
    assert "skipped" in s["data"] and "tokenizer" in s["data"]["skipped"].lower(), s["data"]
    text = plan(args, json_out=False)
    assert "  parallel       ZeRO-3 (deepspeed: " in text and "units on the host" in text, text
    assert "  data           not counted: " in text, text


def test_two_nodes_share_the_batch_and_the_state(tmp_path):
    model = qwen7b_folder(tmp_path)
    args = ["configs/qwen7b.yaml", f"model_name_or_path={model}", "zero_stage=3", "--no-data"]
    one = plan(args)
    four = plan(args, env={"NNODES": "2", "NPROC_PER_NODE": "2"})
    assert four["world"] == {"nnodes": 2, "nproc_per_node": 2, "world_size": 4}
    assert four["batch"]["global_batch"] == 4 * one["batch"]["global_batch"] == 4 * 1 * 8
    for kind in ("master", "moments", "weights"):  # LoRA adapters' state and the frozen base's shards
        assert math.isclose(term(four, kind), term(one, kind) / 4), kind
    assert math.isclose(term(four, "gradients"), term(one, "gradients") / 4)
    # The flags win over the environment, as `lf-train CONFIG` takes them.
    flagged = plan(args + ["--nnodes", "1", "--nproc-per-node", "3"], env={"NNODES": "2", "NPROC_PER_NODE": "2"})
    assert flagged["world"]["world_size"] == 3 and flagged["batch"]["global_batch"] == 24
    assert four["memory"]["gpu_per_rank"]["peak_bytes"] < one["memory"]["gpu_per_rank"]["peak_bytes"]


def test_training_prints_the_plan_once_per_node_before_its_workers(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(os.path.join(ROOT, "configs/models/tiny/config.json"), model / "config.json")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"model_name_or_path: {model}\ndataset: alpaca_demo\nper_device_train_batch_size: 3\n")
    e = dict(os.environ, LF_WORKER_BIN=FAKE_WORKER, MASTER_PORT=str(free_port()), NPROC_PER_NODE="2")
    r = subprocess.run([LF_TRAIN, str(cfg)], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr
    err = r.stderr  # lf-train's own lines; the workers' go to stdout
    assert err.count("  batch          global 6 = 3 per device x 1 accumulation x 2 rank(s)") == 1, err
    assert err.index("  gpu / rank") < err.index("rendezvous server listening"), err  # before any worker starts
    assert "WORKER_RANK 1/2" in r.stdout


def test_the_worker_checks_offload_host_bytes_with_the_same_model(tmp_path):
    """Offload's host memory is checked by each node's first worker before anything loads, with the
    bytes `lf-train plan` predicts (one memory model): a model too large for any host fails there."""
    worker = os.path.join(os.path.dirname(LF_TRAIN), "..", "worker", "lf-worker")
    if not os.path.exists(worker):
        import pytest
        pytest.skip("no lf-worker beside lf-train (a build without libtorch)")
    cfg = json.load(open(os.path.join(ROOT, "configs/models/qwen2.5-7b.json")))
    cfg["num_hidden_layers"] = 100000  # ~23T parameters: 16 bytes each is more than any host has
    model = tmp_path / "huge"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(cfg))
    args = ["configs/qwen2.5-1.5b-full.yaml", f"model_name_or_path={model}", "zero_stage=3", "offload=optimizer",
            f"output_dir={tmp_path}/out"]
    host = plan(args + ["--no-data"], env={"NPROC_PER_NODE": "1"})["memory"]["host_per_rank"]["bytes"]
    # The worker itself (lf-train's preflight would refuse the checkpoint's disk space first).
    e = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    r = subprocess.run([worker, "train", *args], capture_output=True, text=True, env=dict(e, CUDA_VISIBLE_DEVICES=""),
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert f"({int(host)} bytes) of host memory on this node" in out, out
    assert "over 1 rank(s), 1 worker(s) on this node" in out, out
