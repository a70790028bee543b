"""Records no training example can be made of are dropped as LLaMA-Factory drops them, but never
silently (issue 29): training warns once with the count by cause and the first records' file:line,
`lf-train preview` and `lf-train doctor` report the same counts, and `invalid_records: error` (an
lf-train key) makes any drop an error (exit 2). Alpaca outputs that are null or not strings, and
Parquet null cells."""
import json, os, re, subprocess, sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
QUICK = ["max_steps=2", "logging_steps=1", "eval_strategy=no", "val_size=0", "plot_loss=false", "save_strategy=no",
         "per_device_train_batch_size=2", "cutoff_len=64"]


def lf(*args, timeout=300):
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    env.pop("NODE_RANK", None)
    p = subprocess.run([LF_TRAIN, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def gappy_alpaca(tmp_path):
    """300 records: every third output null, every seventh of the others the number 42."""
    d = tmp_path / "data"
    d.mkdir()
    records = []
    for i in range(300):
        out = None if i % 3 == 0 else 42 if i % 7 == 0 else f"answer {i}"
        records.append({"instruction": f"Question {i}?", "input": "", "output": out})
    (d / "gappy.json").write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
    (d / "dataset_info.json").write_text(json.dumps({"gappy": {"file_name": "gappy.json"}}))
    nulls = sum(1 for i in range(300) if i % 3 == 0)
    numbers = sum(1 for i in range(300) if i % 3 and i % 7 == 0)
    return d, nulls, numbers


def test_alpaca_null_and_number_outputs_are_counted_by_cause_in_training_preview_and_doctor(tmp_path):
    d, nulls, numbers = gappy_alpaca(tmp_path)
    data = [f"dataset_dir={d}", "dataset=gappy"]
    summary = f"dataset gappy: {nulls + numbers} of 300 records dropped"
    rc, text = lf("configs/tiny_cpu.yaml", f"output_dir={tmp_path / 'out'}", *data, *QUICK)
    assert rc == 0, text[-3000:]
    assert summary in text, text[-3000:]
    # By cause, with the first records' places (the array's line 2 is record 0).
    assert f"{nulls} with 'output' null ({d / 'gappy.json'}:2, {d / 'gappy.json'}:5," in text, text[-3000:]
    assert f"{numbers} with 'output' a number, not a string ({d / 'gappy.json'}:9," in text, text[-3000:]
    # Once per run, not once per record.
    assert text.count(summary) == 1, text[-3000:]
    rc, shown = lf("preview", "configs/tiny_cpu.yaml", *data, "--n", "1")
    assert rc == 0 and summary in shown, shown[-3000:]
    rc, report = lf("doctor", "configs/tiny_cpu.yaml", *data, f"output_dir={tmp_path / 'out2'}", "--json")
    doc = json.JSONDecoder().raw_decode(report[report.index("{"):])[0]
    found = [c for c in doc["checks"] if c["check"] == "dataset-records"]
    assert found and found[0]["status"] == "WARN" and summary in found[0]["detail"], found
    assert not (tmp_path / "out2").exists(), "the doctor created output_dir"


def test_invalid_records_error_stops_the_job_naming_them(tmp_path):
    d, nulls, numbers = gappy_alpaca(tmp_path)
    rc, text = lf("configs/tiny_cpu.yaml", f"output_dir={tmp_path / 'out'}", f"dataset_dir={d}", "dataset=gappy",
                  "invalid_records=error", *QUICK)
    assert rc == 2, text[-3000:]
    assert f"{nulls + numbers} of 300 records dropped" in text and "(invalid_records: error)" in text, text[-3000:]


def test_parquet_null_cells_are_counted(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    d = tmp_path / "data"
    d.mkdir()
    outputs = [None if i % 2 else f"answer {i}" for i in range(40)]
    pq.write_table(pa.table({"instruction": [f"Question {i}?" for i in range(40)], "input": [""] * 40,
                             "output": outputs}), d / "half.parquet")
    (d / "dataset_info.json").write_text(json.dumps({"half": {"file_name": "half.parquet"}}))
    rc, text = lf("configs/tiny_cpu.yaml", f"output_dir={tmp_path / 'out'}", f"dataset_dir={d}", "dataset=half", *QUICK)
    if "built without Parquet support" in text:
        pytest.skip("this lf-train was built without Parquet")
    assert rc == 0, text[-3000:]
    assert f"dataset half: 20 of 40 records dropped, no training example can be made of them: 20 with 'output' " \
           f"null ({d / 'half.parquet'}:row 2, {d / 'half.parquet'}:row 4," in text, text[-3000:]
