"""Every config key lf-train marks implemented acts, and every key it accepts "without effect" has
none (issue 28). The list comes from `lf-train keys --json` (the schema), so a new key cannot skip
this test: a key without an observable fails it, and so does one whose observable does not change.

Each implemented key declares its observable (src/config/config_schema.h), taken from the component
that consumes the key, never from the config itself (which would have passed neat_packing while the
trainer dropped it): per-step losses, learning rates, evaluation losses, the number of logged steps,
the tokens counted, paths in output_dir, or lines of the run's log. This test runs the tiny job
through the real lf-train -> agent -> lf-worker path twice per key: with the key's context alone
(the baseline, shared by the keys of one context) and with the key set to its sample value, and
requires the observable to differ. The no-effect keys are set all at once, to values other than
their defaults, and the losses and final weights must stay bit-equal (bisected on failure).

Values the schema cannot state (folders, datasets that need files) are given by SETUP below."""
import fnmatch, functools, hashlib, json, os, shutil, subprocess, sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
# Short runs of the tiny model: 4 steps of 2 examples, a small slice of the data.
BASE = {"max_steps": "4", "logging_steps": "1", "eval_strategy": "no", "val_size": "0", "plot_loss": "false",
        "save_strategy": "no", "per_device_train_batch_size": "2", "max_samples": "24", "cutoff_len": "96",
        "num_train_epochs": "3", "warmup_ratio": "0.25", "save_steps": "1000"}
ALL_KEYS = json.loads(subprocess.check_output([LF_TRAIN, "keys", "--json"], cwd=ROOT, text=True))
KEYS = [k for k in ALL_KEYS if "table" not in k]  # the YAML's; the DeepSpeed and FSDP tables below
IMPLEMENTED = [k for k in KEYS if k["policy"] == "implemented"]
NO_EFFECT = [k for k in KEYS if k["policy"] == "no_effect"]
REFUSED = [k for k in KEYS if k["policy"] == "refused"]


def run(out, overrides, ranks=1, expect_ok=True):
    """One lf-train run of configs/tiny_cpu.yaml with BASE, then `overrides`; returns (rc, log)."""
    args = {**BASE, "output_dir": str(out), **overrides}
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE=str(ranks), MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1")
    p = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", *[f"{k}={v}" for k, v in args.items()]], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    log = p.stdout + p.stderr
    if expect_ok:
        assert p.returncode == 0, f"{overrides}: exit {p.returncode}\n{log[-4000:]}"
    return p.returncode, log


# ---- fixtures the samples need (built once per session)

@pytest.fixture(scope="session")
def fx(tmp_path_factory):
    """Folders and datasets some keys' samples point at."""
    t = tmp_path_factory.mktemp("key_effects")
    f = {"tmp": t}
    # A trained tiny model (config.json + weights + tokenizer) and a LoRA adapter on it.
    run(t / "model", {"finetuning_type": "full"})
    f["model"] = t / "model"
    run(t / "adapter", {"finetuning_type": "lora", "model_name_or_path": str(f["model"])})
    f["adapter"] = t / "adapter"
    # A checkpoint to resume from (save every step; keep the folder of step 2).
    run(t / "ckpt", {"finetuning_type": "full", "save_strategy": "steps", "save_steps": "2", "max_steps": "2"})
    f["checkpoint"] = t / "ckpt" / "checkpoint-2"
    # A dataset folder whose `alpaca_en_demo` is other text, and datasets for tools and thinking.
    data = t / "data"
    shutil.copytree(os.path.join(ROOT, "data"), data)
    (data / "alpaca_en_demo.json").write_text(json.dumps(
        [{"instruction": f"Count to {i}.", "input": "", "output": " ".join(str(j) for j in range(i))}
         for i in range(2, 40)]))
    tools = [{"conversations": [{"from": "human", "value": f"weather in city {i}?"},
                                {"from": "function_call", "value": json.dumps({"name": "weather", "arguments": {"city": i}})},
                                {"from": "observation", "value": f"{i} degrees"},
                                {"from": "gpt", "value": f"It is {i} degrees."}],
              "tools": json.dumps([{"name": "weather", "description": "the weather",
                                    "parameters": {"type": "object", "properties": {"city": {"type": "integer"}}}}])}
             for i in range(30)]
    (data / "tools.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tools))
    think = [{"conversations": [{"from": "human", "value": f"What is {i} plus {i}?"},
                                {"from": "gpt", "value": f"<think>\n{i} and {i} make {2 * i}.\n</think>\n\n{2 * i}"},
                                {"from": "human", "value": "And doubled?"},
                                {"from": "gpt", "value": f"<think>\nTwice {2 * i}.\n</think>\n\n{4 * i}"}]}
             for i in range(30)]
    (data / "think.jsonl").write_text("".join(json.dumps(r) + "\n" for r in think))
    info = json.loads((data / "dataset_info.json").read_text())
    info["tools"] = {"file_name": "tools.jsonl", "formatting": "sharegpt",
                     "columns": {"messages": "conversations", "tools": "tools"}}
    info["think"] = {"file_name": "think.jsonl", "formatting": "sharegpt", "columns": {"messages": "conversations"}}
    (data / "dataset_info.json").write_text(json.dumps(info))
    # Every third `output` null: records LLaMA-Factory drops (invalid_records' context).
    (data / "gappy.json").write_text(json.dumps(
        [{"instruction": f"Say {i}.", "input": "", "output": None if i % 3 == 0 else f"{i}"} for i in range(30)]))
    info["gappy"] = {"file_name": "gappy.json"}
    (data / "dataset_info.json").write_text(json.dumps(info))
    f["data"] = data
    # A mixture-of-experts model (tests/fixtures/train/lf_families's Qwen3-MoE) with the tiny tokenizer.
    moe = t / "moe_model"
    shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "train", "lf_families", "qwen3_moe", "model"), moe)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(ROOT, "configs", "models", "tiny", name), moe)
    f["moe_model"] = moe
    return f


# key -> (context, sample) for keys whose sample or context the schema cannot give (paths, data).
# A callable takes the fixtures. The context is set in both runs; the sample only in the second.
SETUP = {
    "model_name_or_path": lambda f: ({}, {"model_name_or_path": str(f["model"])}),
    "init_weights": lambda f: ({"model_name_or_path": str(f["model"])}, {"init_weights": "random"}),
    "finetuning_type": lambda f: ({"model_name_or_path": str(f["model"])}, {"finetuning_type": "lora"}),
    "adapter_name_or_path": lambda f: ({"finetuning_type": "lora", "model_name_or_path": str(f["model"])},
                                       {"adapter_name_or_path": str(f["adapter"])}),
    # A reference model other than the policy's start: the trained tiny model (and its adapter merged into it).
    "ref_model": lambda f: ({"stage": "dpo", "dataset": PREFERENCE_DATA["dpo"]}, {"ref_model": str(f["model"])}),
    "ref_model_adapters": lambda f: ({"stage": "dpo", "dataset": PREFERENCE_DATA["dpo"], "ref_model": str(f["model"])},
                                     {"ref_model_adapters": str(f["adapter"])}),
    "ref_model_quantization_bit": lambda f: ({"stage": "dpo", "dataset": PREFERENCE_DATA["dpo"], "ref_model": str(f["model"])},
                                             {"ref_model_quantization_bit": "4"}),
    "create_new_adapter": lambda f: ({"finetuning_type": "lora", "model_name_or_path": str(f["model"]),
                                      "adapter_name_or_path": str(f["adapter"])}, {"create_new_adapter": "true"}),
    "dataset": lambda f: ({}, {"dataset": "sharegpt_demo"}),
    "dataset_dir": lambda f: ({}, {"dataset_dir": str(f["data"])}),
    # A template whose special tokens the tiny tokenizer has (it knows qwen's), and a cutoff the
    # demo rows exceed (the schema's sample, default + 1, cuts nothing of them).
    "template": lambda f: ({}, {"template": "default"}),
    "cutoff_len": lambda f: ({}, {"cutoff_len": "48"}),
    "val_size": lambda f: ({}, {"val_size": "0.2"}),
    "mask_history": lambda f: ({"dataset": "sharegpt_demo"}, {"mask_history": "true"}),
    "neat_packing": lambda f: ({"packing": "true"}, {"neat_packing": "true"}),
    "tokenized_path": lambda f: ({}, {"tokenized_path": "{out}/../tokenized"}),
    "invalid_records": lambda f: ({"dataset_dir": str(f["data"]), "dataset": "gappy"}, {"invalid_records": "error"}),
    "mix_strategy": lambda f: ({"dataset": "alpaca_en_demo,identity"}, {"mix_strategy": "interleave_under"}),
    "interleave_probs": lambda f: ({"dataset": "alpaca_en_demo,identity", "mix_strategy": "interleave_under"},
                                   {"interleave_probs": "[0.9,0.1]"}),
    "tool_format": lambda f: ({"dataset_dir": str(f["data"]), "dataset": "tools"}, {"tool_format": "default"}),
    "enable_thinking": lambda f: ({"dataset_dir": str(f["data"]), "dataset": "think", "template": "qwen3"},
                                  {"enable_thinking": "false"}),
    # LLaMA-Factory keeps the history turns' thoughts only where mask_history drops them otherwise.
    "preserve_thinking": lambda f: ({"dataset_dir": str(f["data"]), "dataset": "think", "template": "qwen3",
                                     "mask_history": "true"}, {"preserve_thinking": "true"}),
    "preprocessing_batch_size": lambda f: ({"packing": "true"}, {"preprocessing_batch_size": "4"}),
    # The load-balancing loss needs experts: the fixture's Qwen3-MoE.
    "moe_aux_loss_coef": lambda f: ({"model_name_or_path": str(f["moe_model"])}, {"moe_aux_loss_coef": "0.5"}),
    # Expert parallelism places experts: the fixture's Qwen3-MoE (4 experts a layer) on the key's 2 ranks.
    "expert_model_parallel_size": lambda f: ({"model_name_or_path": str(f["moe_model"])},
                                             {"expert_model_parallel_size": "2"}),
    # Reentrant checkpointing drops the load-balancing loss's gradient (transformers): off, it trains.
    "use_reentrant_gc": lambda f: ({"model_name_or_path": str(f["moe_model"]), "moe_aux_loss_coef": "0.5",
                                    "disable_gradient_checkpointing": "false"}, {"use_reentrant_gc": "false"}),
    # Enough examples for several of the tokenizer's chunks of 64 (its threads take whole chunks).
    "preprocessing_num_workers": lambda f: ({"max_samples": "400"}, {"preprocessing_num_workers": "1"}),
    "eval_dataset": lambda f: ({}, {"eval_dataset": "identity"}),
    "per_device_eval_batch_size": lambda f: ({"eval_strategy": "steps", "eval_steps": "2", "val_size": "5"},
                                             {"per_device_eval_batch_size": "3"}),
    "eval_strategy": lambda f: ({"val_size": "4"}, {"eval_strategy": "steps", "eval_steps": "2"}),
    "eval_steps": lambda f: ({"val_size": "4", "eval_strategy": "steps"}, {"eval_steps": "2"}),
    "save_strategy": lambda f: ({}, {"save_strategy": "steps", "save_steps": "2"}),
    "save_steps": lambda f: ({"save_strategy": "steps"}, {"save_steps": "2"}),
    "save_total_limit": lambda f: ({"save_strategy": "steps", "save_steps": "1"}, {"save_total_limit": "2"}),
    "logging_steps": lambda f: ({}, {"logging_steps": "2"}),
    "max_steps": lambda f: ({}, {"max_steps": "3"}),
    "num_train_epochs": lambda f: ({"max_steps": "-1", "max_samples": "8"}, {"num_train_epochs": "1"}),
    "output_dir": lambda f: ({}, {"output_dir": "{out}/../elsewhere"}),
    "overwrite_output_dir": lambda f: ({"output_dir": str(f["checkpoint"].parent), "overwrite_output_dir": "true",
                                        "max_steps": "3"}, {"overwrite_output_dir": "false"}),
    "resume_from_checkpoint": lambda f: ({"max_steps": "3"}, {"resume_from_checkpoint": str(f["checkpoint"])}),
    "report_to": lambda f: ({}, {"report_to": "tensorboard"}),
    "include_num_input_tokens_seen": lambda f: ({}, {"include_num_input_tokens_seen": "all"}),
    "lora_target": lambda f: ({"finetuning_type": "lora", "model_name_or_path": str(f["model"])},
                              {"lora_target": "q_proj,v_proj"}),
    # OFT's two keys (exactly one non-zero: peft's rule), on the trained model.
    "oft_rank": lambda f: ({"finetuning_type": "oft", "oft_block_size": "0", "oft_rank": "2",
                            "model_name_or_path": str(f["model"])}, {"oft_rank": "4"}),
    "oft_block_size": lambda f: ({"finetuning_type": "oft", "model_name_or_path": str(f["model"])},
                                 {"oft_block_size": "8"}),
    "freeze_trainable_modules": lambda f: ({"finetuning_type": "freeze"}, {"freeze_trainable_modules": "mlp"}),
    "lr_scheduler_type": lambda f: ({}, {"lr_scheduler_type": "constant"}),
    "deepspeed": lambda f: ({}, {"deepspeed": os.path.join(ROOT, "tests", "fixtures", "config", "ds_z2_config.json")}),
    # A predict run instead of training (do_predict needs predict_with_generate and eval_dataset beside it).
    "do_train": lambda f: ({}, {"do_train": "false", **PREDICT}),
    "do_predict": lambda f: ({}, {"do_predict": "true", **PREDICT}),
    "predict_with_generate": lambda f: ({}, {"predict_with_generate": "true", **PREDICT}),
}
PREDICT = {"do_train": "false", "do_predict": "true", "predict_with_generate": "true", "eval_dataset": "alpaca_en_demo",
           "max_samples": "4", "max_new_tokens": "8"}
# The sample context that makes a LoRA key act: a trained model (a random one has nothing to adapt).
LORA_KEYS = {"lora_rank", "lora_alpha", "lora_dropout", "use_rslora", "use_dora", "loraplus_lr_ratio",
             "additional_target", "pissa_init", "pissa_iter", "pissa_convert"}
FREEZE_KEYS = {"freeze_trainable_layers", "freeze_extra_modules"}
PREFERENCE_DATA = {"dpo": "dpo_en_demo", "rm": "dpo_en_demo", "kto": "kto_en_demo"}


def yaml_lines(text):
    """The schema's sample_context ("key: value" lines) as overrides."""
    out = {}
    for line in text.splitlines():
        if line.strip():
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def case_of(key, f):
    """(context, sample overrides) of an implemented key."""
    name = key["name"]
    if name in SETUP:
        return SETUP[name](f)
    context = yaml_lines(key.get("sample_context", ""))
    if name in LORA_KEYS:
        context.update({"finetuning_type": "lora", "model_name_or_path": str(f["model"])})
    if name in FREEZE_KEYS:
        context["finetuning_type"] = "freeze"
    # The preference stages' keys (context "stage: dpo" / "stage: kto"): the stage's demo dataset.
    if context.get("stage") in PREFERENCE_DATA:
        context["dataset"] = PREFERENCE_DATA[context["stage"]]
    return context, {name: key["sample"]}


def read_log(out):
    path = os.path.join(out, "trainer_log.jsonl")
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []


def state(out):
    path = os.path.join(out, "trainer_state.json")
    return json.load(open(path)) if os.path.exists(path) else {}


def weights_digest(out):
    h = hashlib.sha256()
    for name in ("model.safetensors", "adapter_model.safetensors"):
        p = os.path.join(out, name)
        if os.path.exists(p):
            h.update(open(p, "rb").read())
    return h.hexdigest()


def observe(kind, out, log):
    """The value of an observable after a run into `out` whose log is `log`."""
    what, _, arg = kind.partition(":")
    if what == "losses":
        return [e.get("loss") for e in read_log(out) if "loss" in e]
    if what == "lr":
        return [e.get("lr") for e in read_log(out) if "lr" in e]
    if what == "grad_norm":
        return [e.get("grad_norm") for e in state(out).get("log_history", []) if "grad_norm" in e]
    if what == "eval":
        results = os.path.join(out, "all_results.json")
        final = json.load(open(results)).get("eval_loss") if os.path.exists(results) else None
        return [e.get("eval_loss") for e in read_log(out) if "eval_loss" in e] + [final]
    if what == "log_entries":
        return len([e for e in read_log(out) if "loss" in e])
    if what == "tokens":
        return state(out).get("num_input_tokens_seen")
    if what == "weights":
        return weights_digest(out)
    if what == "file":
        base = os.path.normpath(os.path.join(out, os.path.dirname(arg))) if arg.startswith("..") else out
        pattern = os.path.basename(arg) if arg.startswith("..") else arg
        return sorted(p for p in os.listdir(base) if fnmatch.fnmatch(p, pattern)) if os.path.isdir(base) else []
    if what == "predictions":  # a predict run's generated_predictions.jsonl
        path = os.path.join(out, "generated_predictions.jsonl")
        return open(path, encoding="utf-8").read() if os.path.exists(path) else None
    if what == "log":
        # The message part of each line holding TEXT (timestamps and pids differ between runs).
        return sorted(l.split("] ", 1)[-1] for l in log.splitlines() if arg in l)
    raise AssertionError(f"unknown observable kind {kind!r}")


@functools.lru_cache(maxsize=None)
def baseline(context_items, ranks, tmp):
    out = os.path.join(tmp, f"base-{abs(hash(context_items)) % 10**8}-{ranks}")
    context = {k: v.replace("{out}", out) for k, v in context_items}
    rc, log = run(out, context, ranks)
    return out, log


def test_every_implemented_key_declares_an_observable():
    missing = [k["name"] for k in IMPLEMENTED if not k.get("observable")]
    assert not missing, f"implemented keys without an observable (config_schema.cpp .observe(...)): {missing}"
    assert len(IMPLEMENTED) > 60


@pytest.mark.parametrize("name", [k["name"] for k in IMPLEMENTED])
def test_implemented_key_acts(name, fx):
    key = next(k for k in KEYS if k["name"] == name)
    context, sample = case_of(key, fx)
    ranks = key.get("ranks", 1)
    base_out, base_log = baseline(tuple(sorted(context.items())), ranks, str(fx["tmp"]))
    out = str(fx["tmp"] / f"set-{name}")
    overrides = {k: v.replace("{out}", out) for k, v in {**context, **sample}.items()}
    kind = key["observable"]
    if kind == "refused":
        rc, log = run(out, overrides, ranks, expect_ok=False)
        assert rc == 2 and name in log, f"{name}: expected a refusal naming it (exit 2), got exit {rc}:\n{log[-2000:]}"
        return
    # Observed before the run: a file observable may sit beside both folders.
    before = observe(kind, base_out, base_log) if kind != "outdir" else None
    rc, log = run(out, overrides, ranks)
    if kind == "outdir":
        target = overrides["output_dir"]
        assert os.path.exists(os.path.join(target, "trainer_log.jsonl")), f"{name}: no outputs in {target}"
        return
    after = observe(kind, out, log)
    assert before != after, (f"{name}={sample[name]} (context {context}) left its observable `{kind}` unchanged: "
                             f"{after!r}")


def no_effect_value(key):
    """A value other than LLaMA-Factory's default that the YAML accepts, for a no-effect key."""
    t, d = key.get("lf_type", ""), key.get("lf_default", "None")
    if d in ("True", "False"):
        return "false" if d == "True" else "true"
    if "bool" in t:
        return "true"
    if t.startswith("int") or (d.lstrip("-").isdigit()):
        return str(int(d) + 1) if d.lstrip("-").isdigit() else "3"
    if t.startswith("float") or d.replace(".", "", 1).replace("e-", "", 1).isdigit():
        return "0.25"
    if d.startswith("[") or "list" in t:
        return "[x]"
    return "lf_key_effect_sample"


def test_no_effect_keys_change_nothing(fx):
    """All no-effect keys at once: the losses and the weights stay bit-equal (bisected on failure)."""
    values = {k["name"]: no_effect_value(k) for k in NO_EFFECT}
    base_out, _ = baseline((), 1, str(fx["tmp"]))
    want = (observe("losses", base_out, ""), weights_digest(base_out))

    def changes(names):
        out = str(fx["tmp"] / f"noeffect-{len(names)}-{abs(hash(tuple(names))) % 10**8}")
        rc, log = run(out, {n: values[n] for n in names})
        assert log.count("has no effect in lf-train") >= len(names) or len(names) > 50, log[-3000:]
        return (observe("losses", out, log), weights_digest(out)) != want

    names = sorted(values)
    assert len(names) > 150
    if not changes(names):
        return
    while len(names) > 1:  # the one key that changes training
        half = names[: len(names) // 2]
        names = half if changes(half) else names[len(names) // 2:]
    pytest.fail(f"`{names[0]}: {values[names[0]]}` is accepted without effect but changes the losses or weights: "
                "implement it (with an observable) or refuse it")


@pytest.mark.parametrize("name", [k["name"] for k in REFUSED])
def test_refused_key_is_refused(name, fx):
    """A refused key at a value other than its default stops the job before any worker, naming it."""
    key = next(k for k in KEYS if k["name"] == name)
    rc, log = run(fx["tmp"] / f"refused-{name}", {name: no_effect_value(key)}, expect_ok=False)
    assert rc == 2 and f"`{name}" in log and "Traceback" not in log, f"{name}: exit {rc}\n{log[-2000:]}"
