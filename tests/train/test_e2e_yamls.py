"""Issue 18's acceptance: one end-to-end LLaMA-Factory YAML per addition (tests/fixtures/train/e2e/*.yaml)
runs through `lf-train` and writes its outputs: Qwen3, Mistral, lora_target all / by names, use_rslora,
loraplus_lr_ratio, additional_target, use_dora, adapter_name_or_path (trained on, and merged with
create_new_adapter: both from lora_target_all's adapter, run first), finetuning_type freeze, stage pt.
Each YAML is run as a user runs it, from the repository root, only output_dir (and the adapter folder
it names) moved under the test's tmp_path."""
import json, os, subprocess, sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
from train_runs import ROOT, LF_TRAIN, free_port  # noqa: E402

E2E = os.path.join(ROOT, "tests", "fixtures", "train", "e2e")
ORDER = ["lora_target_all", "adapter_continue", "adapter_new", "qwen3_lora", "mistral_lora", "lora_target_names",
         "rslora", "loraplus", "additional_target", "dora", "freeze", "pt"]


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f] if str(path).endswith(".jsonl") else json.load(f)


def adapter_keys(out):
    from safetensors.numpy import load_file
    return set(load_file(str(out / "adapter_model.safetensors")))


def check_outputs(name, out, cfg):
    log = load(out / "trainer_log.jsonl")
    assert [l["current_steps"] for l in log if "loss" in l] == [1, 2], log
    assert all(l["loss"] > 0 for l in log if "loss" in l), log
    assert load(out / "all_results.json")["epoch"] > 0
    assert (out / "trainer_state.json").exists()
    if cfg["finetuning_type"] != "lora":
        assert (out / "model.safetensors").exists() and (out / "config.json").exists(), sorted(os.listdir(out))
        assert not (out / "adapter_config.json").exists()
        return
    ac = load(out / "adapter_config.json")
    keys = adapter_keys(out)
    assert ac["r"] == cfg["lora_rank"] and any(k.endswith("lora_A.weight") for k in keys), (ac, sorted(keys)[:5])
    if name == "dora":
        assert ac["use_dora"] is True, ac
        assert sum(k.endswith(".lora_magnitude_vector") for k in keys) * 2 == sum(k.endswith(".weight") for k in keys)
    else:
        assert ac["use_dora"] is False and not any("magnitude" in k for k in keys), ac
    if name == "rslora":
        assert ac["use_rslora"] is True
    if name == "additional_target":
        assert ac["modules_to_save"] == ["norm"] and "base_model.model.model.norm.weight" in keys, ac
    if name == "lora_target_names":
        assert sorted(ac["target_modules"]) == sorted(cfg["lora_target"].split(",")), ac
        assert not any("layers.0.mlp.down_proj.lora" in k for k in keys), sorted(keys)
    if name == "adapter_new":
        assert sorted(ac["target_modules"]) == ["q_proj", "v_proj"], ac


def test_every_issue18_yaml_runs_end_to_end(tmp_path):
    assert sorted(ORDER) == sorted(f[:-5] for f in os.listdir(E2E) if f.endswith(".yaml")), "a YAML the test misses"
    outs = {}
    for name in ORDER:
        path = os.path.join(E2E, name + ".yaml")
        cfg = yaml.safe_load(open(path))
        out = tmp_path / name
        args = [LF_TRAIN, path, f"output_dir={out}"]
        if "adapter_name_or_path" in cfg:  # the folder another YAML of the set wrote
            src = os.path.basename(cfg["adapter_name_or_path"])
            assert cfg["adapter_name_or_path"] == load_yaml_output(src), cfg
            args.append(f"adapter_name_or_path={outs[src]}")
        env = dict(os.environ, NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
        p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"{name}.yaml: " + (p.stdout + p.stderr)[-3000:]
        check_outputs(name, out, cfg)
        if name == "dora":  # the end-of-run vLLM check: vLLM serves no DoRA adapter
            assert "vLLM does not serve DoRA adapters; merge with `lf-train export`" in p.stderr, p.stderr[-2000:]
        outs[name] = out
    # The trained-on adapter moved from where lora_target_all left it; the merged one made a new one.
    from safetensors.numpy import load_file
    a = load_file(str(outs["lora_target_all"] / "adapter_model.safetensors"))
    b = load_file(str(outs["adapter_continue"] / "adapter_model.safetensors"))
    assert set(a) == set(b) and any(not (a[k] == b[k]).all() for k in a)


def load_yaml_output(name):
    return yaml.safe_load(open(os.path.join(E2E, name + ".yaml")))["output_dir"]


def test_the_yamls_are_llamafactory_yamls():
    """Only keys LLaMA-Factory 0.9.5 knows (src/config/llamafactory_keys.tsv): they run there unchanged."""
    known = {l.split("\t")[0] for l in open(os.path.join(ROOT, "src", "config", "llamafactory_keys.tsv"))}
    for name in ORDER:
        keys = set(yaml.safe_load(open(os.path.join(E2E, name + ".yaml"))))
        assert keys <= known, (name, keys - known)


@pytest.mark.parametrize("yaml_name,overrides,expected", [
    ("dora", ["finetuning_type=full"], "`use_dora` is only valid for LoRA training"),
    ("dora", ["finetuning_type=freeze"], "set `finetuning_type: lora` or remove use_dora"),
    ("pt", ["stage=ppo"], "ppo (PPO generates responses in the training loop) is not implemented"),
    ("pt", ["neat_packing=true"], "`neat_packing` cannot be set as True except SFT"),
])
def test_what_lf_train_cannot_do_exits_2_saying_why(tmp_path, yaml_name, overrides, expected):
    """Refused before anything starts: exit 2, the key, the reason, what to do."""
    env = dict(os.environ, NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    p = subprocess.run([LF_TRAIN, os.path.join(E2E, yaml_name + ".yaml"), f"output_dir={tmp_path / 'o'}", *overrides],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and expected in p.stderr, p.stderr[-2000:]
