"""lf-train's output_dir against LLaMA-Factory 0.9.5's on the same YAML (tests/fixtures/train/
lf_outputs/CASE.yaml, written with LLaMA-Factory's outputs by scripts/fixtures/lf_outputs_reference.py):
the metadata tools read (config.json / generation_config.json special-token ids and use_cache,
adapter_config.json as peft writes it, the chat template and special tokens of the saved tokenizer),
and HF's / LLaMA-Factory's logs and states (trainer_log.jsonl lines, trainer_state.json of the end
and of a checkpoint, *_results.json) key for key and value for value, except those of the weights
and the clock (losses, norms, times, speeds: null in the fixture; LLaMA-Factory's model has random
weights of its own, lf-train's `init_weights: random`)."""
import json, os, subprocess, sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "fixtures"))
from train_runs import ROOT, LF_TRAIN, free_port  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_outputs")
VOLATILE = {"loss", "eval_loss", "train_loss", "grad_norm", "elapsed_time", "remaining_time", "throughput",
            "train_runtime", "eval_runtime", "train_samples_per_second", "train_steps_per_second",
            "eval_samples_per_second", "eval_steps_per_second", "train_tokens_per_second"}


OWN_LOG_FIELDS = {"throughput", "total_tokens"}


def normalise(obj):
    if isinstance(obj, dict):
        return {k: None if k in VOLATILE else normalise(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [normalise(v) for v in obj]
    return obj


def run_case(tmp_path, case):
    out = tmp_path / case
    args = [LF_TRAIN, os.path.join(FIX, case + ".yaml"), "model_name_or_path=configs/models/tiny",
            "init_weights=random", f"output_dir={out}", "plot_loss=false"]
    env = dict(os.environ, NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return out


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f] if str(path).endswith(".jsonl") else json.load(f)


@pytest.mark.parametrize("case", ["full", "lora"])
def test_outputs_are_llamafactorys(tmp_path, case):
    out = run_case(tmp_path, case)
    want_dir = os.path.join(FIX, case)
    for name in sorted(os.listdir(want_dir)):
        ours = out / name.replace("__", "/")
        assert ours.exists(), f"LLaMA-Factory writes {name}, lf-train does not"
        want = os.path.join(want_dir, name)
        if name == "chat_template.jinja":
            assert ours.read_text() == open(want).read(), "the saved chat template is not LLaMA-Factory's"
        elif name == "tokenizer_config.json":
            got, exp = load(ours), load(want)
            assert (got["eos_token"], got["pad_token"]) == (exp["eos_token"], exp["pad_token"])
            assert "chat_template" not in got  # transformers 5 keeps it in chat_template.jinja
        elif name == "config.json":
            got, exp = load(ours), load(want)
            keys = ("bos_token_id", "eos_token_id", "pad_token_id", "use_cache", "architectures", "vocab_size",
                    "tie_word_embeddings")
            assert {k: got.get(k) for k in keys} == {k: exp.get(k) for k in keys}
        elif name == "generation_config.json":
            got, exp = load(ours), load(want)
            got.pop("transformers_version", None), exp.pop("transformers_version", None)
            assert got == exp
        elif name == "adapter_config.json":
            got, exp = load(ours), load(want)
            assert sorted(got.pop("target_modules")) == sorted(exp.pop("target_modules"))  # a set in peft
            got.pop("base_model_name_or_path"), exp.pop("base_model_name_or_path")
            assert got == exp
        else:  # logs, states, results
            got, exp = normalise(load(ours)), load(want)
            if name == "trainer_log.jsonl" and len(got) == len(exp):
                # lf-train's own throughput / total_tokens (real tokens) where LLaMA-Factory writes none
                # (no include_num_input_tokens_seen); where it writes them they must be its values.
                for g, e in zip(got, exp):
                    for k in OWN_LOG_FIELDS - set(e):
                        g.pop(k, None)
            assert got == exp, f"{name} differs:\n ours {json.dumps(got)[:3000]}\n LLaMA-Factory's {json.dumps(exp)[:3000]}"


def test_the_fixture_yaml_is_a_llamafactory_yaml():
    """The YAMLs hold LLaMA-Factory keys only (what the reference ran)."""
    for case in ("full", "lora"):
        keys = set(yaml.safe_load(open(os.path.join(FIX, case + ".yaml"))))
        assert "init_weights" not in keys and "model_name_or_path" not in keys, keys


def tiny_family(tmp_path, arch, **extra):
    """configs/models/tiny (tokenizer and sizes) as another family's config.json."""
    import shutil
    d = tmp_path / arch
    shutil.copytree(os.path.join(ROOT, "configs", "models", "tiny"), d)
    cfg = json.load(open(d / "config.json"))
    cfg.update(architectures=[arch], model_type=arch.replace("ForCausalLM", "").lower(), **extra)
    json.dump(cfg, open(d / "config.json", "w"))
    return d


def run_yaml(tmp_path, model, *overrides, expect_ok=True):
    out = tmp_path / "out"
    args = [LF_TRAIN, os.path.join(FIX, "lora.yaml"), f"model_name_or_path={model}", "init_weights=random",
            f"output_dir={out}", "plot_loss=false", "max_steps=3", *overrides]
    env = dict(os.environ, NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert (p.returncode == 0) == expect_ok, (p.stdout + p.stderr)[-3000:]
    return out, p.stdout + p.stderr


def test_qwen3_with_the_lora_options_users_set(tmp_path):
    """A LLaMA-Factory YAML on a Qwen3 model with rsLoRA, LoRA+, targets by peft's names and modules
    trained beside the adapters runs end to end; the adapter says so as peft writes it."""
    model = tiny_family(tmp_path, "Qwen3ForCausalLM", head_dim=64, attention_bias=False)
    out, _ = run_yaml(tmp_path, model, "use_rslora=true", "loraplus_lr_ratio=8",
                      "lora_target=[self_attn.q_proj, model.layers.1.mlp.down_proj]", "additional_target=norm")
    cfg = load(out / "adapter_config.json")
    assert cfg["use_rslora"] is True and cfg["modules_to_save"] == ["norm"], cfg
    assert sorted(cfg["target_modules"]) == ["model.layers.1.mlp.down_proj", "self_attn.q_proj"], cfg
    from safetensors.numpy import load_file
    names = set(load_file(str(out / "adapter_model.safetensors")))
    assert "base_model.model.model.norm.weight" in names, names
    assert "base_model.model.model.layers.0.self_attn.q_norm.weight" in names, "q_norm ends with norm: peft saves it"
    assert "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight" in names
    assert not any("layers.0.mlp.down_proj.lora" in n for n in names), names


def test_mistral_sliding_window_shorter_than_cutoff_len_is_refused(tmp_path):
    model = tiny_family(tmp_path, "MistralForCausalLM", sliding_window=64)
    _, text = run_yaml(tmp_path, model, "cutoff_len=128", expect_ok=False)
    assert "sliding window of 64 tokens" in text and "set cutoff_len <= 64" in text, text[-2000:]
    run_yaml(tmp_path, model, "cutoff_len=64", "overwrite_output_dir=true")


def test_freeze_yaml_trains_only_the_chosen_modules(tmp_path):
    """finetuning_type: freeze from a LLaMA-Factory YAML, end to end: two runs at different learning
    rates from the same seed save whole models that agree on every frozen tensor and differ on the
    trainable ones (the last layer's mlp), as LLaMA-Factory's _setup_freeze_tuning chooses."""
    from safetensors.numpy import load_file
    n_layers = json.load(open(os.path.join(ROOT, "configs", "models", "tiny", "config.json")))["num_hidden_layers"]
    runs = []
    for lr in ("0.001", "0.01"):
        d = tmp_path / lr
        d.mkdir()
        out, _ = run_yaml(d, os.path.join(ROOT, "configs", "models", "tiny"), "finetuning_type=freeze",
                          "freeze_trainable_layers=1", "freeze_trainable_modules=mlp", f"learning_rate={lr}")
        assert not (out / "adapter_config.json").exists()
        runs.append(load_file(str(out / "model.safetensors")))
    a, b = runs
    assert set(a) == set(b) and len(a) > 10, sorted(a)
    trainable = {n for n in a if n.startswith(f"model.layers.{n_layers - 1}.mlp.")}
    assert len(trainable) == 3, sorted(a)
    for n in a:
        moved = not (a[n] == b[n]).all()
        assert moved == (n in trainable), n


def run_fixture(tmp_path, fixture, yaml_name, name, *overrides, ranks=1, expect_ok=True):
    """lf-train on tests/fixtures/train/FIXTURE/YAML_NAME with the fixture's weights and configs/models/tiny's
    tokenizer (fp32 CPU unless the YAML says otherwise) on `ranks` processes, output in tmp_path/NAME:
    (returncode, log, output folder)."""
    import shutil
    fix = os.path.join(ROOT, "tests", "fixtures", "train", fixture)
    model = tmp_path / "model"
    if not model.exists():
        shutil.copytree(os.path.join(fix, "model"), model)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(ROOT, "configs", "models", "tiny", f), model)
    out = tmp_path / name
    args = [LF_TRAIN, os.path.join(fix, yaml_name), f"model_name_or_path={model}", f"output_dir={out}",
            "plot_loss=false", *overrides]
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE=str(ranks), MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = p.stdout + p.stderr
    if expect_ok:
        assert p.returncode == 0, log[-4000:]
    return p.returncode, log, out


def logged_steps(out):
    """The per-step entries of HF's log_history (trainer_state.json)."""
    return [l for l in load(out / "trainer_state.json")["log_history"] if "loss" in l]


def run_fixture_yaml(tmp_path, fixture, yaml_name, *overrides):
    """run_fixture on one rank, output named for the overrides: the per-step entries of HF's log_history."""
    name = "out" + "".join("_" + o.replace("=", "-") for o in overrides)
    return logged_steps(run_fixture(tmp_path, fixture, yaml_name, name, *overrides)[2])


def assert_steps_are(got, want, loss_rel):
    """Each step's loss, grad_norm, learning rate and epoch as LLaMA-Factory's run logged them."""
    assert [l["step"] for l in got] == [w["step"] for w in want]
    for g, w in zip(got, want):
        assert abs(g["loss"] - w["loss"]) <= loss_rel * w["loss"], (g, w)
        assert abs(g["grad_norm"] - w["grad_norm"]) <= 1e-5 * w["grad_norm"], (g, w)  # seen: 2e-7
        assert abs(g["learning_rate"] - w["lr"]) <= 1e-12 + 1e-9 * w["lr"], (g, w)
        assert abs(g["epoch"] - w["epoch"]) <= 1e-6, (g, w)


def test_pt_run_is_llamafactorys(tmp_path):
    """stage: pt end to end against LLaMA-Factory's own pt run (tests/fixtures/train/lf_pt/, made by
    scripts/fixtures/lf_pt_reference.py): the same YAML, weights and tokenizer give the same loss,
    grad_norm and learning rate at every step (fp32 CPU), as HF's log_history records them."""
    got = run_fixture_yaml(tmp_path, "lf_pt", "pt.yaml")
    assert_steps_are(got, load(os.path.join(ROOT, "tests", "fixtures", "train", "lf_pt", "expected.json"))["steps"],
                     1e-6)  # seen: 7e-8


def test_neat_packing_run_is_llamafactorys(tmp_path):
    """neat_packing end to end against LLaMA-Factory's own neat_packing run (tests/fixtures/train/lf_neat/, made by
    scripts/fixtures/lf_neat_reference.py: its block-diagonal causal mask, positions restarting with each packed
    sequence, rows of cutoff_len holding 3-4 alpaca examples): the same loss, grad_norm, learning rate and epoch
    at every step. The same YAML with `neat_packing: false` is LLaMA-Factory's plain packing run, and its losses
    differ from the neat run's by far more than the tolerance: a dropped neat_packing would fail here."""
    want = load(os.path.join(ROOT, "tests", "fixtures", "train", "lf_neat", "expected.json"))
    assert_steps_are(run_fixture_yaml(tmp_path, "lf_neat", "neat.yaml"), want["steps"], 1e-5)  # seen: 1.6e-7
    plain = run_fixture_yaml(tmp_path, "lf_neat", "neat.yaml", "neat_packing=false", "packing=true")
    assert_steps_are(plain, want["plain_steps"], 1e-5)  # seen: 1.1e-7
    apart = max(abs(p["loss"] - w["loss"]) / w["loss"] for p, w in zip(plain, want["steps"]))
    assert apart > 1e-4, f"plain packing trains like neat_packing (losses within {apart:.1e})"  # seen: 1.2e-3
