"""Node 0's live page over real agents (issue 35), without a browser or lf-worker: two
`lf-train launch` nodes of scripted workers (progs/progress_worker.py: lf-worker's heartbeat wire
format) on loopback, node 0 with --ui-port 0. Its /api/state lists both nodes and their ranks, the
steps advance, rank 0's beats become the curves, each rank's lines arrive, a killed worker shows
as failed with its signal; bound beyond loopback the page's data needs its token; a peer of the
old rendezvous protocol is refused with both versions named. The page in a browser:
tests/ui/test_page_browser.py."""
import json, os, re, signal, socket, time, urllib.error, urllib.request

import rdzv_wire as wire
from harness import Agent, PY, free_port, wait_until

HERE = os.path.dirname(__file__)
PROGRESS = os.path.join(HERE, "progs", "progress_worker.py")


def page_url(agent, timeout=30):
    found = {}

    def printed():
        m = re.search(r"ui: the job's live page is at (http://[0-9.]+:\d+/(\?token=[0-9a-f]+)?)", agent.err)
        if m:
            found["url"] = m.group(1)
        return "url" in found or agent.poll() is not None

    assert wait_until(printed, timeout), agent.err
    assert "url" in found, agent.err
    return found["url"]


def state(url, path="/api/state"):
    base, _, query = url.partition("?")
    with urllib.request.urlopen(base.rstrip("/") + path + ("?" + query if query else ""), timeout=5) as r:
        return json.load(r)


def two_nodes(tmp_path, steps, interval, ui_args=("--ui-port", "0"), env=None):
    port = free_port()
    common = {"NNODES": "2", "MASTER_PORT": str(port), "LF_UI_LINGER_S": "0", **(env or {})}
    cmd = ["launch", "--nproc-per-node", "2", "--", PY, PROGRESS, "--steps", str(steps), "--interval", str(interval)]
    n0 = Agent(cmd[:1] + list(ui_args) + cmd[1:], env=dict(common, NODE_RANK="0"), tmp=str(tmp_path))
    n1 = Agent(cmd[:1] + ["--ui-port", "0"] + cmd[1:], env=dict(common, NODE_RANK="1"), tmp=str(tmp_path))
    return n0, n1


def test_the_page_lists_every_node_and_rank_and_shows_a_killed_worker(tmp_path):
    n0, n1 = two_nodes(tmp_path, steps=600, interval=0.05)
    try:
        url = page_url(n0)
        ranks = lambda s: {r["rank"]: r for n in s["nodes"] for r in n["ranks"]}
        assert wait_until(lambda: len(ranks(state(url))) == 4 and
                          all(r["state"] == "running" for r in ranks(state(url)).values()), 30), state(url)
        s = state(url)
        assert [n["node_rank"] for n in s["nodes"]] == [0, 1], s["nodes"]
        assert all(n["gpus"] == [] and "libnvidia-ml" in n["gpu_note"] for n in s["nodes"]), s["nodes"]
        first = s["progress"]["step"]
        assert wait_until(lambda: state(url)["progress"]["step"] > first + 5, 20), (first, state(url)["progress"])
        s = state(url)
        assert len(s["curves"]["loss"]) >= s["progress"]["step"] - 2, (len(s["curves"]["loss"]), s["progress"])
        assert s["progress"]["tokens_per_s"] == 1000.0 + 1001.0 + 1002.0 + 1003.0, s["progress"]
        # Node 1's ranks' lines, relayed to node 0.
        logs = state(url, "/api/logs?rank=3")
        assert any(l["text"].startswith("step ") for l in logs["lines"]), logs
        assert "ui: the job's live page is served by node 0" in n1.err, n1.err
        # Kill a worker of node 1: node 0's page shows it failed, with its signal, and the failure.
        os.kill(ranks(s)[3]["pid"], signal.SIGKILL)
        assert n1.wait(30) != 0 and n0.wait(30) != 0
    finally:
        n0.cleanup()
        n1.cleanup()


def test_a_killed_worker_is_failed_with_its_signal_while_the_page_lingers(tmp_path):
    n0, n1 = two_nodes(tmp_path, steps=600, interval=0.05, env={"LF_UI_LINGER_S": "20"})
    try:
        url = page_url(n0)
        assert wait_until(lambda: sum(len(n["ranks"]) for n in state(url)["nodes"]) == 4, 30)
        victim = [r for n in state(url)["nodes"] for r in n["ranks"] if r["rank"] == 2][0]["pid"]
        os.kill(victim, signal.SIGKILL)
        assert n1.wait(30) != 0
        # Node 0 stopped its workers and waits for the open page's next poll (LF_UI_LINGER_S).
        assert wait_until(lambda: "the live page shows its end" in n0.err, 30), n0.err
        s = state(url)
        rank2 = [r for n in s["nodes"] for r in n["ranks"] if r["rank"] == 2][0]
        assert rank2["state"] == "failed" and rank2["exit"] == "SIGKILL (signal 9)", rank2
        assert s["job"]["phase"] == "finished" and s["job"]["exit_code"] != 0, s["job"]
        assert [f["rank"] for f in s["failures"]] == [2] and s["failures"][0]["exit"] == "SIGKILL (signal 9)", s["failures"]
        assert n0.wait(30) != 0  # that poll ended the linger
    finally:
        n0.cleanup()
        n1.cleanup()


def test_bound_beyond_loopback_the_data_needs_the_token(tmp_path):
    n0, n1 = two_nodes(tmp_path, steps=400, interval=0.05, ui_args=("--ui-port", "0", "--ui-addr", "0.0.0.0"))
    try:
        url = page_url(n0)
        assert "?token=" in url, url
        base = url.split("?")[0]
        with urllib.request.urlopen(base, timeout=5) as r:  # the page's own files: nothing of the job
            assert r.status == 200
        try:
            urllib.request.urlopen(base + "api/state", timeout=5)
            raise AssertionError("the job's state was served without the token")
        except urllib.error.HTTPError as e:
            assert e.code == 401 and "needs its token" in e.read().decode()
        assert wait_until(lambda: len(state(url)["nodes"]) == 2, 30), state(url)
        req = urllib.request.Request(base + "api/state", method="POST")
        try:
            urllib.request.urlopen(req, timeout=5)
            raise AssertionError("a POST was answered")
        except urllib.error.HTTPError as e:
            assert e.code == 405
    finally:
        n0.cleanup()
        n1.cleanup()


def test_a_peer_of_the_old_protocol_is_refused_naming_both_versions(tmp_path):
    port = free_port()
    n0 = Agent(["launch", "--nnodes", "2", "--node-rank", "0", "--master-port", str(port), "--ui-port", "0", "--",
                PY, PROGRESS, "--steps", "5"], tmp=str(tmp_path))
    try:
        assert wait_until(lambda: "rendezvous server listening" in n0.err, 20), n0.err
        c = wire.connect(port)
        c.sendall(wire.frame(wire.JOIN, b"", version=3))
        reason = wire.refused_reason(wire.read_until_closed(c))
        assert reason and "protocol version 3, this lf-train speaks 4" in reason, reason
    finally:
        n0.cleanup()
