"""The DeepSpeed and FSDP key tables, covered as the YAML keys are (issue 28; test_key_effects.py
does the YAML): every key a table marks implemented changes its declared observable in a run of
the tiny job through the real launcher (a `deepspeed:` file, or `fsdp` / `fsdp_config`), every
refused one stops the job naming the key, and the no-effect ones, all at once at values other
than their defaults, leave the losses and the weights bit-equal. The tables come from
`lf-train keys --json`, so a key added to one cannot skip this test."""
import copy, functools, json, os

import pytest

from test_key_effects import ALL_KEYS, observe, read_log, run, weights_digest, yaml_lines

DS = [k for k in ALL_KEYS if k.get("table") == "deepspeed"]
FSDP = [k for k in ALL_KEYS if k.get("table") in ("fsdp", "fsdp_config")]
# The smallest DeepSpeed file HF accepts with the YAML's batch ("auto": the YAML's values).
DS_BASE = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}


def nested(path, value):
    out = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return out


def merge(a, b):
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def ds_run(out, file_obj, yaml_context="", expect_ok=True):
    path = f"{out}.ds.json"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    json.dump(file_obj, open(path, "w"))
    return run(out, {"deepspeed": path, **yaml_lines(yaml_context)}, expect_ok=expect_ok)


@functools.lru_cache(maxsize=None)
def ds_baseline(tmp, context, yaml_context):
    out = os.path.join(tmp, f"ds-base-{abs(hash((context, yaml_context))) % 10**8}")
    _, log = ds_run(out, json.loads(context), yaml_context)
    return out, log


def table_value(k):
    """A value other than the table's default (refused keys: other than what is accepted)."""
    if k.get("opaque"):
        return {"enabled": True}
    t, d = k.get("type", ""), (k.get("accepted") or k.get("default") or "").split("|")[0]
    if t == "bool":
        return not (d == "true")
    if t in ("int", "number"):
        return (float(d) * 2 + 3) if t == "number" and d else (int(float(d)) + 3 if d else 3)
    if t == "list":
        return [7]
    return "lf_key_effect_sample"


@pytest.mark.parametrize("name", [k["name"] for k in DS if k["policy"] in ("implemented", "matches_yaml")])
def test_deepspeed_key_acts(name, tmp_path_factory):
    k = next(x for x in DS if x["name"] == name)
    assert k["observable"] and k["sample"], f"{name}: no observable (src/config/deepspeed_keys.cpp acts(...))"
    tmp = str(tmp_path_factory.getbasetemp())
    context = merge(DS_BASE, json.loads(k["context"] or "{}"))
    with_key = merge(context, nested(name, json.loads(k["sample"])))
    out = os.path.join(tmp, f"ds-set-{name}")
    if k["observable"] == "refused":
        rc, log = ds_run(out, with_key, k["yaml_context"], expect_ok=False)
        assert rc == 2 and name.split(".")[-1] in log, f"{name}: expected a refusal naming it, got exit {rc}\n{log[-2000:]}"
        return
    base_out, base_log = ds_baseline(tmp, json.dumps(context, sort_keys=True), k["yaml_context"])
    before = observe(k["observable"], base_out, base_log)
    _, log = ds_run(out, with_key, k["yaml_context"])
    after = observe(k["observable"], out, log)
    assert before != after, f"{name}={k['sample']} left `{k['observable']}` unchanged: {after!r}"


@pytest.mark.parametrize("name", [k["name"] for k in DS if k["policy"] == "refused"])
def test_deepspeed_refused_key_is_refused(name, tmp_path):
    k = next(x for x in DS if x["name"] == name)
    yaml_context = "fp16: true\nbf16: false" if k.get("fp16_only") else ""
    rc, log = ds_run(tmp_path / "run", merge(DS_BASE, nested(name, table_value(k))), yaml_context, expect_ok=False)
    assert rc == 2 and name.split(".")[-1] in log, f"{name}: exit {rc}\n{log[-2000:]}"


def test_deepspeed_no_effect_keys_change_nothing(tmp_path):
    file_obj = DS_BASE
    names = [k["name"] for k in DS if k["policy"] == "no_effect"]
    for k in DS:
        if k["policy"] == "no_effect":
            file_obj = merge(file_obj, nested(k["name"], table_value(k)))
    _, base_log = ds_run(tmp_path / "base", DS_BASE)
    _, log = ds_run(tmp_path / "set", file_obj)
    assert len(names) > 40
    want = (observe("losses", tmp_path / "base", base_log), weights_digest(tmp_path / "base"))
    assert (observe("losses", tmp_path / "set", log), weights_digest(tmp_path / "set")) == want
    missing = [n for n in names if n not in log]
    assert not missing, f"no-effect DeepSpeed keys set without their warning: {missing}"


def fsdp_overrides(k, with_sample):
    ctx = yaml_lines(k.get("yaml_context", ""))
    if not with_sample:
        return ctx
    if k["table"] == "fsdp":
        return {**ctx, "fsdp": " ".join(filter(None, [ctx.get("fsdp", ""), k["sample"]]))}
    return {**ctx, "fsdp_config": json.dumps({k["name"]: json.loads(k["sample"])})}


@pytest.mark.parametrize("name", [f"{k['table']}:{k['name']}" for k in FSDP if k["policy"] == "implemented"])
def test_fsdp_key_acts(name, tmp_path):
    table, key = name.split(":")
    k = next(x for x in FSDP if x["table"] == table and x["name"] == key)
    assert k["observable"] and k["sample"], f"{name}: no observable (src/config/fsdp_config.cpp)"
    _, base_log = run(tmp_path / "base", fsdp_overrides(k, False))
    _, log = run(tmp_path / "set", fsdp_overrides(k, True))
    before, after = observe(k["observable"], tmp_path / "base", base_log), observe(k["observable"], tmp_path / "set", log)
    assert before != after, f"{name}={k['sample']} left `{k['observable']}` unchanged: {after!r}"


@pytest.mark.parametrize("name", [f"{k['table']}:{k['name']}" for k in FSDP if k["policy"] == "refused"])
def test_fsdp_refused_key_is_refused(name, tmp_path):
    table, key = name.split(":")
    k = next(x for x in FSDP if x["table"] == table and x["name"] == key)
    value = {"fsdp": key} if table == "fsdp" else \
        {"fsdp": "full_shard", "fsdp_config": json.dumps({key: {"x": 1} if k["default"].startswith("null") else True})}
    rc, log = run(tmp_path / "run", value, expect_ok=False)
    assert rc == 2 and key in log, f"{name}: exit {rc}\n{log[-2000:]}"


def fsdp_other_value(k):
    d = k["default"].split("|")
    if d[0] in ("true", "false"):
        return d[0] != "true" if len(d) == 1 else None
    return "lf_key_effect_sample" if d[0].startswith('"') else 3


def test_fsdp_no_effect_keys_change_nothing(tmp_path):
    cfg = {k["name"]: fsdp_other_value(k) for k in FSDP
           if k["table"] == "fsdp_config" and k["policy"] in ("no_effect", "wrap") and fsdp_other_value(k) is not None}
    assert len(cfg) >= 8, cfg
    _, base_log = run(tmp_path / "base", {"fsdp": "full_shard"})
    _, log = run(tmp_path / "set", {"fsdp": "full_shard auto_wrap", "fsdp_config": json.dumps(cfg)})
    want = (observe("losses", tmp_path / "base", base_log), weights_digest(tmp_path / "base"))
    assert (observe("losses", tmp_path / "set", log), weights_digest(tmp_path / "set")) == want
    missing = [n for n in cfg if n not in log]
    assert not missing, f"fsdp_config keys set without their line: {missing}"
