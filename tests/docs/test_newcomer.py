"""A newcomer's path through the README, executed (issue 35): the commands of its marked blocks
(`<!-- newcomer: NAME -->` before an indented code block) run as written from the repository root:
install (scripts/run_tiny.sh: installs, builds, trains), the first run, the first 2-node loopback
run. The only change made to them: the fixed MASTER_PORT becomes a free port. Every link of the
README and the guides resolves (check_links.py)."""
import json, os, re, socket, subprocess, sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blocks():
    """{name: [command lines]} of the README's newcomer blocks."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    out = {}
    for m in re.finditer(r"<!-- newcomer: ([\w-]+) -->\n((?:    .*\n)+)", text):
        out[m[1]] = [l[4:].split("  #")[0].rstrip() for l in m[2].splitlines() if l.strip()]
    return out


def run_block(name, env=None, timeout=900):
    script = "set -euo pipefail\n" + "\n".join(blocks()[name]) + "\n"
    script = script.replace("MASTER_PORT=29500", f"MASTER_PORT={free_port()}")
    p = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})))
    assert p.returncode == 0, f"README block `{name}` failed (exit {p.returncode}):\n{script}\n{(p.stdout + p.stderr)[-4000:]}"
    return p.stdout + p.stderr


def losses(out_dir):
    return [json.loads(l)["loss"] for l in open(os.path.join(ROOT, out_dir, "trainer_log.jsonl")) if '"loss"' in l]


def test_the_readme_has_the_newcomer_blocks():
    assert set(blocks()) >= {"install", "first-run", "two-nodes"}, blocks()


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
    log = run_block("two-nodes")
    assert "node 1 of 2" in log and "node 0 of 2" in log, log[-3000:]
    two = losses("saves/two-nodes")  # twice the global batch: about half the steps, the loss falls too
    assert 0 < len(two) < len(first) and two[-1] < two[0] - 2, (first, two)


def test_every_link_resolves():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "docs", "check_links.py"), "--root", ROOT],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout
