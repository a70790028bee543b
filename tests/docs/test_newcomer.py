"""A newcomer's path through the README, executed (issue 35): the commands of its marked blocks
(`<!-- newcomer: NAME -->` before an indented code block) run as written from the repository root:
install (scripts/run_tiny.sh: installs, builds, trains), the first run, the first 2-node loopback
run with node 0's live page (polled while the job runs: both nodes listed), and the page over the
finished run (`lf-train ui`) in headless Chromium: its curve and its data preview. The only change
made to the blocks: the fixed MASTER_PORT and page port become free ports. Every link of the README
and the guides resolves (check_links.py)."""
import json, os, re, signal, subprocess, sys, threading, time, urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "ui"))
from cdp import Chromium  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests", "launcher"))
from harness import free_port  # noqa: E402



def blocks():
    """{name: [command lines]} of the README's newcomer blocks."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    out = {}
    for m in re.finditer(r"<!-- newcomer: ([\w-]+) -->\n((?:    .*\n)+)", text):
        out[m[1]] = [l[4:].split("  #")[0].rstrip() for l in m[2].splitlines() if l.strip()]
    return out


def block_script(name, ui_port=None):
    script = "set -euo pipefail\n" + "\n".join(blocks()[name]) + "\n"
    script = script.replace("MASTER_PORT=29500", f"MASTER_PORT={free_port()}")
    return script.replace("--ui-port 8080", f"--ui-port {ui_port or free_port()}")


def run_block(name, env=None, timeout=900, ui_port=None):
    script = block_script(name, ui_port)
    p = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})))
    assert p.returncode == 0, f"README block `{name}` failed (exit {p.returncode}):\n{script}\n{(p.stdout + p.stderr)[-4000:]}"
    return p.stdout + p.stderr


def watch_page(port, seen, stop):
    """Polls the live page's state while the job runs, as an open page does; keeps the most nodes seen."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=5) as r:
                s = json.load(r)
            if len(s["nodes"]) >= len(seen.get("nodes", [])):
                seen.update(s)
        except OSError:
            pass
        stop.wait(0.3)


def losses(out_dir):
    return [json.loads(l)["loss"] for l in open(os.path.join(ROOT, out_dir, "trainer_log.jsonl")) if '"loss"' in l]


def test_the_readme_has_the_newcomer_blocks():
    assert set(blocks()) >= {"install", "first-run", "two-nodes", "the-page"}, blocks()


def test_install_first_run_and_two_nodes_as_the_readme_says():
    # install: only run_tiny.sh (the main job; it installs and builds, then trains): test.sh is
    # what runs this test.
    install = [c for c in blocks()["install"] if "run_tiny.sh" in c]
    assert install, blocks()["install"]
    p = subprocess.run(["bash", "-c", f"set -e; {install[0]}"], cwd=ROOT, capture_output=True, text=True,
                       timeout=1200, env=dict(os.environ, OMP_NUM_THREADS="1", MASTER_PORT=str(free_port())))
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    run_block("first-run")
    first = losses("saves/tiny-cpu/full/sft")
    assert len(first) > 10 and first[-1] < first[0] - 3, first  # ~6.9 -> ~0.9, as the README says
    # The two-node run with node 0's live page, watched while it runs.
    ui_port, seen, stop = free_port(), {}, threading.Event()
    watcher = threading.Thread(target=watch_page, args=(ui_port, seen, stop))
    watcher.start()
    try:
        log = run_block("two-nodes", ui_port=ui_port)
    finally:
        stop.set()
        watcher.join()
    assert "node 1 of 2" in log and "node 0 of 2" in log, log[-3000:]
    assert f"ui: the job's live page is at http://127.0.0.1:{ui_port}/" in log, log[-3000:]
    assert sorted(n["node_rank"] for n in seen.get("nodes", [])) == [0, 1], seen
    two = losses("saves/two-nodes")  # twice the global batch: about half the steps, the loss falls too
    assert 0 < len(two) < len(first) and two[-1] < two[0] - 2, (first, two)
    # The page over the finished run, in a browser: the curve of its logged losses, the data preview.
    page_log = open(os.path.join(ROOT, "saves", "the-page.log"), "w+")
    ui = subprocess.Popen(["bash", "-c", "exec " + blocks()["the-page"][0]], cwd=ROOT, stdout=page_log,
                          stderr=subprocess.STDOUT)
    browser = None
    try:
        url, deadline = None, time.time() + 60
        while url is None and time.time() < deadline and ui.poll() is None:
            page_log.seek(0)
            m = re.search(r"ui: .* is at (http://127\.0\.0\.1:\d+/)", page_log.read())
            url = m[1] if m else time.sleep(0.1)
        assert url, page_log.read()
        browser = Chromium()
        page = browser.open(url)
        assert page.wait_for("Number(document.querySelector('#chart-loss path.series.loss').dataset.points) > 1", 60)
        assert page.wait_for("document.querySelectorAll('#preview .sample .masked').length > 0", 60)
    finally:
        if browser:
            browser.close()
        ui.send_signal(signal.SIGTERM)
        ui.wait(20)


def test_every_link_resolves():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "docs", "check_links.py"), "--root", ROOT],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout
