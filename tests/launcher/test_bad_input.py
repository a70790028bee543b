"""Bad input gets a clear error, an exit code from the README, and loses nothing."""
import socket, time

import pytest

import rdzv_wire as wire
from harness import Agent, PY, WORKER, free_port, live_pids_with, unique_marker, wait_no_survivors

EXIT_CONFIG, EXIT_RDZV, EXIT_NETWORK, EXIT_ABORTED = 2, 10, 11, 13


def launch(tmp_path, *args, env=None):
    return Agent(["launch", *args], env=env, tmp=str(tmp_path))


def test_command_that_does_not_exist_fails_before_rendezvous(tmp_path, agents):
    a = launch(tmp_path, "--master-port", str(free_port()), "--", "no-such-program-xyz")
    agents.append(a)
    assert a.wait(10) == EXIT_CONFIG
    assert "'no-such-program-xyz' not found in PATH" in a.err


def test_a_script_without_a_shebang_is_a_config_error_not_a_worker_to_restart(tmp_path, agents):
    """exec fails with ENOEXEC: the spawn says so (exit 2) instead of reporting a worker that
    exited 126, which --max-restarts would restart again and again."""
    script = tmp_path / "no_shebang.sh"
    script.write_text("echo hello\n")
    script.chmod(0o755)
    a = launch(tmp_path, "--master-port", str(free_port()), "--max-restarts", "2", "--", str(script))
    agents.append(a)
    assert a.wait(20) == EXIT_CONFIG, a.err
    assert "cannot be run: Exec format error (a script needs a '#!' first line" in a.err, a.err
    assert "generation 1" not in a.err, "restarted"


def test_master_unreachable_names_address_and_what_to_check(tmp_path, agents):
    port = free_port()
    a = launch(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-port", str(port), "--join-timeout", "2",
               "--", PY, WORKER)
    agents.append(a)
    t0 = time.time()
    assert a.wait(15) == EXIT_NETWORK
    assert time.time() - t0 >= 1.5, "must retry until the join timeout"
    assert f"could not reach the rendezvous server at 127.0.0.1:{port}" in a.err
    assert "NODE_RANK=0" in a.err


def test_rendezvous_port_in_use(tmp_path, agents):
    with socket.socket() as blocker:
        blocker.bind(("0.0.0.0", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        a = launch(tmp_path, "--master-port", str(port), "--", PY, WORKER)
        agents.append(a)
        assert a.wait(10) == EXIT_NETWORK
    assert f"rendezvous port {port}" in a.err and "already in use" in a.err


def test_wrong_token_is_refused_without_revealing_it(tmp_path, agents):
    port = free_port()
    n0 = launch(tmp_path, "--nnodes", "2", "--node-rank", "0", "--master-port", str(port), "--join-timeout", "3",
                "--", PY, WORKER, env={"LF_JOB_TOKEN": "right-secret"})
    n1 = launch(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-port", str(port), "--", PY, WORKER,
                env={"LF_JOB_TOKEN": "wrong-secret"})
    agents += [n0, n1]
    assert n1.wait(10) == EXIT_RDZV
    assert "authentication failed" in n1.err
    assert "right-secret" not in n1.err + n1.out
    assert n0.wait(15) == EXIT_RDZV  # its partner never came: join timeout
    assert "1 of 2 nodes joined" in n0.err


def test_a_token_file_is_the_token_and_its_mistakes_are_said(tmp_path, agents):
    """LF_JOB_TOKEN_FILE (issue 29): the file's content is the job's token (a node with the same
    token in LF_JOB_TOKEN joins); an empty file, or a file and a variable that disagree, exit 2
    without showing either token."""
    good = tmp_path / "token"
    good.write_text("file-secret\n")
    port = free_port()
    n0 = launch(tmp_path, "--nnodes", "2", "--node-rank", "0", "--master-port", str(port), "--", PY, WORKER,
                env={"LF_JOB_TOKEN_FILE": str(good)})
    n1 = launch(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-port", str(port), "--", PY, WORKER,
                env={"LF_JOB_TOKEN": "file-secret"})
    agents += [n0, n1]
    assert n0.wait(20) == 0, n0.err
    assert n1.wait(20) == 0, n1.err
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for env, expected in (({"LF_JOB_TOKEN_FILE": str(empty)}, "is empty"),
                          ({"LF_JOB_TOKEN_FILE": str(good), "LF_JOB_TOKEN": "other"}, "give different tokens"),
                          ({"LF_JOB_TOKEN_FILE": str(tmp_path / "missing")}, "cannot read it")):
        a = launch(tmp_path, "--master-port", str(free_port()), "--", PY, WORKER, env=env)
        agents.append(a)
        assert a.wait(10) == EXIT_CONFIG, a.err
        assert expected in a.err and "file-secret" not in a.err, a.err


def test_node_that_never_arrives_times_out_with_who_is_missing(tmp_path, agents):
    n0 = launch(tmp_path, "--nnodes", "3", "--node-rank", "0", "--master-port", str(free_port()), "--join-timeout",
                "2", "--", PY, WORKER)
    agents.append(n0)
    assert n0.wait(15) == EXIT_RDZV
    assert "rendezvous timed out after 2s: 1 of 3 nodes joined (node rank 0" in n0.err


@pytest.mark.parametrize("what", ["nproc", "command", "nnodes"])
def test_mismatch_between_nodes_fails_both_naming_both_sides(tmp_path, agents, what):
    port = free_port()
    common = ["--master-port", str(port), "--join-timeout", "20"]
    a0 = ["--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "2", *common, "--", PY, WORKER]
    a1 = ["--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2", *common, "--", PY, WORKER]
    if what == "nproc":
        a1[5] = "1"
        expected = "nproc mismatch"
    elif what == "command":
        a1 += ["--sleep", "1"]
        expected = "command/config mismatch"
    else:
        a1[1] = "3"
        expected = "nnodes mismatch"
    n0 = launch(tmp_path, *a0)
    time.sleep(0.3)
    n1 = launch(tmp_path, *a1)
    agents += [n0, n1]
    assert n0.wait(15) == EXIT_RDZV and n1.wait(15) == EXIT_RDZV
    for n in (n0, n1):
        assert expected in n.err, n.err
    if what != "nnodes":
        assert "node rank 0" in n1.err and "node rank 1" in n1.err


def test_version_mismatch_fails_every_node(tmp_path, agents):
    port = free_port()
    n0 = launch(tmp_path, "--nnodes", "2", "--node-rank", "0", "--master-port", str(port), "--", PY, WORKER)
    agents.append(n0)
    time.sleep(0.5)
    c = wire.connect(port)
    c.sendall(wire.join(node_rank=1, version="9.9.9", min_nodes=2, max_nodes=2,
                        config_hash="irrelevant: version is checked first"))
    reason = wire.refused_reason(wire.read_until_closed(c))
    assert reason and "lf-train version mismatch" in reason and "9.9.9" in reason
    assert n0.wait(10) == EXIT_RDZV
    assert "version mismatch" in n0.err


def test_duplicate_node_rank_fails_every_node(tmp_path, agents):
    port = free_port()
    args = ["--nnodes", "3", "--master-port", str(port), "--join-timeout", "20"]
    n0 = launch(tmp_path, *args, "--node-rank", "0", "--", PY, WORKER)
    time.sleep(0.3)
    n1 = launch(tmp_path, *args, "--node-rank", "1", "--", PY, WORKER)
    time.sleep(0.3)
    n1b = launch(tmp_path, *args, "--node-rank", "1", "--", PY, WORKER)
    agents += [n0, n1, n1b]
    for n in (n0, n1, n1b):
        assert n.wait(15) == EXIT_RDZV
        assert "duplicate node rank 1" in n.err, n.err


def test_a_node_beyond_nnodes_is_refused_and_the_job_runs_on(tmp_path, agents):
    """Once the job formed, a surplus node is a stranger (issue 29): refused on its own, the job
    named; the job's two nodes never hear of it (it once failed every node: "more nodes than
    --nnodes 2")."""
    port = free_port()
    marker = unique_marker("toomany")
    server = Agent(["rdzv-server", "--nnodes", "2", "--port", str(port)], tmp=str(tmp_path))
    agents.append(server)
    args = ["--nnodes", "2", "--master-port", str(port), "--", PY, WORKER, "--marker", marker, "--sleep", "6"]
    a, b = launch(tmp_path, *args), launch(tmp_path, *args)
    agents += [a, b]
    from harness import wait_until
    assert wait_until(lambda: len(live_pids_with(marker)) == 2, 20)
    c = launch(tmp_path, *args)
    agents.append(c)
    assert c.wait(20) == EXIT_RDZV, c.err
    assert "the job is full: --nnodes 2" in c.err and f"join refused by job 'none' at 127.0.0.1:{port}" in c.err, c.err
    assert a.wait(30) == 0, a.err
    assert b.wait(30) == 0, b.err
    assert wait_no_survivors(marker)


def test_malformed_and_oversized_frames_are_dropped_and_the_server_lives_on(tmp_path, agents):
    port = free_port()
    n0 = launch(tmp_path, "--nnodes", "2", "--node-rank", "0", "--master-port", str(port), "--join-timeout", "30",
                "--", PY, WORKER)
    agents.append(n0)
    time.sleep(0.5)
    hostile = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                       # wrong protocol
        wire.frame(wire.JOIN, b"", length=1 << 30),                  # 1 GiB claimed
        wire.frame(wire.JOIN, b"\x01\x02\x03"),                      # truncated Join
        wire.frame(wire.JOIN, b"", version=7),                       # foreign protocol version
        wire.frame(999, b""),                                        # unknown message type
        wire.frame(4, wire.i64(0)),                                  # heartbeat before join
    ]
    for payload in hostile:
        c = wire.connect(port)
        c.sendall(payload)
        wire.read_until_closed(c, timeout=5)  # the server hangs up on it (possibly with a Refused)
        c.close()
    # The real partner still gets in and the job runs.
    n1 = launch(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-port", str(port), "--", PY, WORKER)
    agents.append(n1)
    assert n0.wait(30) == 0, n0.err
    assert n1.wait(30) == 0, n1.err


def test_bad_nnodes_and_node_rank_values(tmp_path, agents):
    for args, expected in [(["--nnodes", "0"], "must be N or MIN:MAX"), (["--nnodes", "3:2"], "MIN must not exceed MAX"),
                           (["--nnodes", "2", "--node-rank", "2"], "NODE_RANK 2 is out of range")]:
        a = launch(tmp_path, *args, "--", PY, WORKER)
        agents.append(a)
        assert a.wait(10) == EXIT_CONFIG
        assert expected in a.err


def test_rdzv_server_port_flag(tmp_path, agents):
    """--port wins over MASTER_PORT, 0 included (a free port, printed); a port past 65535 is an
    error (it once wrapped: 70000 bound 4464)."""
    busy = free_port()
    s = Agent(["rdzv-server", "--nnodes", "1", "--port", "0"], env={"MASTER_PORT": str(busy)}, tmp=str(tmp_path))
    agents.append(s)
    from harness import wait_until
    assert wait_until(lambda: "listening on port" in s.out, 10), s.err
    printed = int(s.out.split("listening on port")[1].split()[0])
    assert printed not in (0, busy), s.out
    bad = Agent(["rdzv-server", "--nnodes", "1", "--port", "70000"], tmp=str(tmp_path))
    agents.append(bad)
    assert bad.wait(10) == EXIT_CONFIG
    assert "port 70000 is not a TCP port" in bad.err


def test_idle_connections_cannot_starve_the_rendezvous_server(tmp_path, agents):
    """80 connections that send half a frame and go silent, against a server limited to 64
    descriptors: accept fails with EMFILE. The server retries every 100 ms with one warning
    (it once spun a core, logging millions of lines), closes connections that say nothing
    within 5 s (with a Refused frame), and then the real agents join and the job runs."""
    import subprocess
    from harness import LF_TRAIN
    port = free_port()
    err = tmp_path / "server.err"
    server = subprocess.Popen(["bash", "-c", f"ulimit -n 64; exec {LF_TRAIN} rdzv-server --nnodes 2 --port {port} "
                               "--join-timeout 60"], stdout=subprocess.DEVNULL, stderr=open(err, "w"))
    conns = []
    try:
        time.sleep(0.5)
        for _ in range(80):
            c = socket.create_connection(("127.0.0.1", port))
            c.send(b"LFRV")  # the start of a frame header, then silence
            conns.append(c)
        time.sleep(2)
        nodes = [launch(tmp_path, "--nnodes", "2", "--master-port", str(port), "--join-timeout", "40", "--", PY,
                        WORKER) for _ in range(2)]
        agents.extend(nodes)
        for n in nodes:
            assert n.wait(60) == 0, n.err
    finally:
        for c in conns:
            c.close()
        server.kill()
        server.wait()
    log = err.read_text()
    assert 1 <= log.count("accept failed") <= 10, log[-2000:]  # one per run of failures, not one per retry
