"""The live page in a real browser (issue 35): headless Chromium (Debian's), driven over its DevTools
protocol (cdp.py), watches a 2-node loopback CPU training job through the real lf-train, node 0
serving the page (--ui-port 0): both nodes are listed with their ranks, the step advances, the CPU
box says it has no GPUs, the data preview shows masked tokens; a worker killed on node 1 shows as
failed with its exit (SIGKILL) once node 0 stopped the job, the page lingering for the browser's
last poll. Then `lf-train ui OUTPUT_DIR` shows the same run's curves. Screenshots are kept under
the build's Testing/ui/ (LF_UI_ARTIFACTS)."""
import json, os, re, signal, subprocess, sys, time, urllib.request

import pytest

from cdp import Chromium

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
ARTIFACTS = os.environ.get("LF_UI_ARTIFACTS") or os.path.join(ROOT, "build", "Testing", "ui")



def page_url(log_path, proc, timeout=120):
    """The URL node 0 printed ("ui: the job's live page is at http://127.0.0.1:P/")."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = re.search(r"ui: .* is at (http://127\.0\.0\.1:\d+/)", open(log_path).read())
        if m:
            return m[1]
        assert proc.poll() is None, open(log_path).read()[-3000:]
        time.sleep(0.1)
    raise AssertionError("no page URL printed:\n" + open(log_path).read()[-3000:])


def api(url, path):
    with urllib.request.urlopen(url.rstrip("/") + path, timeout=10) as r:
        return json.load(r)


@pytest.fixture
def browser():
    b = Chromium()
    yield b
    b.close()


def test_the_page_watches_a_two_node_job_and_shows_a_killed_worker(browser, tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, NNODES="2", NPROC_PER_NODE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1", NCCL_SOCKET_IFNAME="lo", LF_UI_LINGER_S="30")
    # Long enough to watch (a few hundred tiny steps), short enough for CI; the kill ends it early.
    args = ["configs/tiny_cpu.yaml", f"output_dir={out}", "max_steps=3000", "logging_steps=5", "save_strategy=no",
            "eval_strategy=no", "val_size=0", "plot_loss=false"]
    logs = [tmp_path / "node0.log", tmp_path / "node1.log"]
    nodes = [subprocess.Popen([LF_TRAIN, *args] + (["--ui-port", "0"] if r == 0 else []), cwd=ROOT,
                              env=dict(env, NODE_RANK=str(r)), stdout=open(logs[r], "w"), stderr=subprocess.STDOUT)
             for r in range(2)]
    try:
        url = page_url(logs[0], nodes[0])
        page = browser.open(url)
        # Both nodes listed, each with its rank running.
        assert page.wait_for("document.querySelectorAll('section.node').length === 2 && "
                             "document.querySelectorAll('tr.rank[data-state=\"running\"]').length === 2", 120), \
            page.evaluate("document.body.innerText")
        # The step advances while we watch.
        first = page.wait_for("Number(document.getElementById('step').dataset.step) > 0 && "
                              "Number(document.getElementById('step').dataset.step)", 60)
        assert first, page.evaluate("document.body.innerText")
        later = page.wait_for(f"Number(document.getElementById('step').dataset.step) > {first} && "
                              "Number(document.getElementById('step').dataset.step)", 30)
        assert later and later > first, (first, later)
        # A CPU box: the page says so, node by node.
        notes = page.evaluate("[...document.querySelectorAll('.gpu-note')].map(e => e.textContent)")
        assert len(notes) == 2 and all(n.startswith("No GPUs on this node") for n in notes), notes
        # The data preview: the job's own examples through its template, masked spans marked.
        assert page.wait_for("document.querySelectorAll('#preview .sample .masked').length > 0 && "
                             "document.querySelectorAll('#preview .sample .trained').length > 0", 60), \
            page.evaluate("document.getElementById('preview-info').textContent")
        masked = page.evaluate("document.querySelector('#preview .sample .masked').textContent")
        assert masked.strip(), masked
        # The curves draw the loss, and the figures the throughput.
        assert page.wait_for("Number(document.querySelector('#chart-loss path.series.loss').dataset.points) > 1", 30)
        assert page.evaluate("document.querySelector('[data-figure=\"tokens/s\"] .value').textContent") != "–"
        # Each rank's last lines.
        assert page.wait_for("document.querySelectorAll('#logs span').length > 0", 30)
        page.screenshot(os.path.join(ARTIFACTS, "live_page.png"))

        # Kill node 1's worker: the job stops on both nodes; the page shows rank 1 failed, killed by SIGKILL.
        state = api(url, "/api/state")
        victim = [r for n in state["nodes"] for r in n["ranks"] if r["rank"] == 1][0]["pid"]
        os.kill(victim, signal.SIGKILL)
        codes = [p.wait(120) for p in nodes]
        assert all(c != 0 for c in codes), codes
        row = "document.querySelector('tr.rank[data-rank=\"1\"]')"
        assert page.wait_for(f"{row}.dataset.state === 'failed'", 30), page.evaluate("document.body.innerText")
        assert page.evaluate(f"{row}.dataset.exit") == "SIGKILL (signal 9)"
        assert page.evaluate("document.getElementById('job').dataset.phase") == "failed"
        failures = page.evaluate("[...document.querySelectorAll('#failures tbody tr')].map(r => r.textContent)")
        assert any("SIGKILL (signal 9)" in f for f in failures), failures
        page.screenshot(os.path.join(ARTIFACTS, "live_page_failed.png"))
        assert "ui: the job is over; the live page shows its end" in open(logs[0]).read()
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
                p.wait(10)

    # The finished (here: failed) run's output_dir, through `lf-train ui`.
    ui_log = tmp_path / "ui.log"
    ui = subprocess.Popen([LF_TRAIN, "ui", str(out), "--port", "0", "--config", "configs/tiny_cpu.yaml"], cwd=ROOT,
                          stdout=open(ui_log, "w"), stderr=subprocess.STDOUT)
    try:
        url = page_url(ui_log, ui)
        page = browser.open(url)
        assert page.wait_for("Number(document.querySelector('#chart-loss path.series.loss').dataset.points) > 1", 30), \
            page.evaluate("document.body.innerText")
        assert page.wait_for("document.querySelectorAll('#preview .sample .masked').length > 0", 60)
        logged = [json.loads(l) for l in open(out / "trainer_log.jsonl")]
        assert page.evaluate("Number(document.getElementById('step').dataset.step)") == logged[-1]["current_steps"]
        page.screenshot(os.path.join(ARTIFACTS, "finished_run_page.png"))
    finally:
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(20) == 0, open(ui_log).read()
