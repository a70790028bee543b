"""Two hosts with their own addresses (network namespaces joined by a veth pair): the job runs
across them with MASTER_ADDR = host A's address, and a cut link stops both sides by themselves."""
import os, shutil, subprocess, time

import pytest

from netns_pair import sh, two_hosts
from harness import Agent, PY, WORKER, live_pids_with, unique_marker, wait_no_survivors, wait_until

EXIT_RDZV, EXIT_ABORTED, EXIT_NETWORK = 10, 13, 11


@pytest.fixture
def hosts():
    with two_hosts("lf", 213) as h:
        yield h


def start_pair(hosts, tmp_path, worker_args, extra=()):
    args = ["launch", "--nnodes", "2", "--nproc-per-node", "2", "--master-addr", hosts["addr_a"], "--master-port",
            "29400", "--join-timeout", "20", *extra]
    n0 = Agent(args + ["--node-rank", "0", "--", PY, WORKER, *worker_args], netns=hosts["a"], tmp=str(tmp_path))
    n1 = Agent(args + ["--node-rank", "1", "--", PY, WORKER, *worker_args], netns=hosts["b"], tmp=str(tmp_path))
    return n0, n1


def test_job_runs_across_two_hosts(hosts, tmp_path):
    n0, n1 = start_pair(hosts, tmp_path, [])
    try:
        assert n0.wait(30) == 0, n0.err
        assert n1.wait(30) == 0, n1.err
        envs = {**n0.envs(), **n1.envs()}
        assert sorted(envs) == [0, 1, 2, 3]
        # Host B's workers reach the workers' store on host A by its address.
        assert {e["MASTER_ADDR"] for e in envs.values()} == {hosts["addr_a"]}
        assert {e["LF_RDZV_ADDR"] for e in envs.values()} == {hosts["addr_a"]}
    finally:
        n0.cleanup()
        n1.cleanup()


def test_link_cut_stops_both_sides_by_themselves(hosts, tmp_path):
    marker = unique_marker("linkcut")
    n0, n1 = start_pair(hosts, tmp_path, ["--marker", marker, "--sleep", "120"])
    try:
        assert wait_until(lambda: len(live_pids_with(marker)) == 4, 20)
        t0 = time.time()
        sh("ip", "netns", "exec", hosts["a"], "ip", "link", "set", hosts["va"], "down")
        assert n0.wait(15) == EXIT_ABORTED, n0.err
        assert n1.wait(15) == EXIT_NETWORK, n1.err
        assert time.time() - t0 <= 15
        assert "lost the agent of node 1" in n0.err
        assert "no message from the rendezvous server" in n1.err
        assert wait_no_survivors(marker), live_pids_with(marker)
    finally:
        n0.cleanup()
        n1.cleanup()


def test_join_timeout_bounds_a_master_that_never_answers(hosts, tmp_path):
    """MASTER_ADDR behind a firewall that drops packets (here: a neighbour entry with a MAC no
    one has, so SYNs leave and nothing comes back). The kernel would retry the connect for
    about two minutes; --join-timeout 3 ends the agent with a network error instead."""
    silent = hosts["addr_b"].rsplit(".", 1)[0] + ".9"
    sh("ip", "netns", "exec", hosts["b"], "ip", "neigh", "add", silent, "lladdr", "02:00:00:00:00:99", "dev",
       hosts["vb"], "nud", "permanent")
    n1 = Agent(["launch", "--nnodes", "2", "--node-rank", "1", "--master-addr", silent, "--master-port", "29400",
                "--join-timeout", "3", "--", PY, WORKER], netns=hosts["b"], tmp=str(tmp_path))
    try:
        assert n1.wait(30) == EXIT_NETWORK, n1.err
        assert f"could not reach the rendezvous server at {silent}:29400 within 3" in n1.err, n1.err
        assert "no answer" in n1.err, n1.err
    finally:
        n1.cleanup()


def test_an_agent_never_joins_itself(hosts, tmp_path):
    """A node that dials node 0 before its server listens can be handed the server's own port as
    its ephemeral source port: the kernel then connects the socket to itself (a TCP simultaneous
    open), and the agent would talk to itself while node 0's bind fails. Host B's only ephemeral
    port is made the rendezvous port, so every dial there is such a self-connect: the agent must
    count it as a refusal and end with the join timeout's error, not sit in a conversation with
    itself."""
    sh("ip", "netns", "exec", hosts["b"], "sysctl", "-qw", "net.ipv4.ip_local_port_range=29400 29400")
    n1 = Agent(["launch", "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port",
                "29400", "--join-timeout", "3", "--", PY, WORKER], netns=hosts["b"], tmp=str(tmp_path))
    try:
        assert n1.wait(30) == EXIT_NETWORK, n1.err
        assert "could not reach the rendezvous server at 127.0.0.1:29400 within 3" in n1.err, n1.err
        assert "connected to itself" in n1.err, n1.err
    finally:
        n1.cleanup()


def listening(netns=None):
    """(address, port) of every TCP listener, as `ss` reports them (in a namespace, or here)."""
    cmd = (["ip", "netns", "exec", netns] if netns else []) + ["ss", "-Hltn"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        local = line.split()[3]  # State Recv-Q Send-Q Local:Port Peer:Port
        addr, _, port = local.rpartition(":")
        found.add((addr.strip("[]"), int(port)))
    return found


def test_a_stranger_host_without_the_token_cannot_join_or_stop_the_job(hosts, tmp_path):
    """Issue 29: host A's server listens on MASTER_ADDR's address only and its metrics on
    loopback (`ss` in A's namespace); from host B, a node without the job's token is refused and
    the job (two nodes with the token) ends well; B cannot reach A's metrics at all."""
    marker = unique_marker("stranger")
    port, metrics = 29400, 29401
    token = {"LF_JOB_TOKEN": "netns-job-secret"}
    args = ["launch", "--nnodes", "2", "--nproc-per-node", "1", "--master-addr", hosts["addr_a"], "--master-port",
            str(port), "--join-timeout", "20", "--metrics-port", str(metrics)]
    work = [PY, WORKER, "--marker", marker, "--sleep", "8"]
    n0 = Agent(args + ["--node-rank", "0", "--"] + work, env=token, netns=hosts["a"], tmp=str(tmp_path))
    n1 = Agent(args + ["--node-rank", "1", "--"] + work, env=token, netns=hosts["b"], tmp=str(tmp_path))
    strangers = []
    try:
        assert wait_until(lambda: len(live_pids_with(marker)) == 2, 20), n0.err + n1.err
        where = listening(hosts["a"])
        assert (hosts["addr_a"], port) in where and ("0.0.0.0", port) not in where and ("*", port) not in where, where
        assert ("127.0.0.1", metrics) in where and ("0.0.0.0", metrics) not in where, where
        no_token = {"LF_JOB_TOKEN": "", "LF_JOB_TOKEN_FILE": ""}
        for extra in ([], ["--node-rank", "1"]):  # a surplus node, and one claiming a live rank
            s = Agent(["launch", "--nnodes", "2", "--master-addr", hosts["addr_a"], "--master-port", str(port),
                       *extra, "--", PY, WORKER], env=no_token, netns=hosts["b"], tmp=str(tmp_path))
            strangers.append(s)
            assert s.wait(15) == EXIT_RDZV, s.err
            assert "authentication failed" in s.err and "netns-job-secret" not in s.err, s.err
        probe = subprocess.run(["ip", "netns", "exec", hosts["b"], PY, "-c",
                                "import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), 3)\n"
                                " print('open')\nexcept OSError as e:\n print('closed', e)", hosts["addr_a"],
                                str(metrics)], capture_output=True, text=True)
        assert probe.stdout.startswith("closed"), probe.stdout + probe.stderr
        assert n0.poll() is None and n1.poll() is None, "a stranger stopped the job"
        assert n0.wait(30) == 0, n0.err
        assert n1.wait(30) == 0, n1.err
    finally:
        for a in [n0, n1, *strangers]:
            a.cleanup()


def test_a_loopback_job_listens_on_loopback_and_bind_all_listens_everywhere(tmp_path):
    """MASTER_ADDR=127.0.0.1 (the default): the rendezvous port is 127.0.0.1's only; with
    --rdzv-bind-all it is every address's, said in one line."""
    from harness import free_port
    for extra, addr in (([], "127.0.0.1"), (["--rdzv-bind-all"], "0.0.0.0")):
        port = free_port()
        a = Agent(["launch", "--nnodes", "2", "--node-rank", "0", "--master-port", str(port), "--join-timeout", "10",
                   *extra, "--", PY, WORKER], tmp=str(tmp_path))
        try:
            assert wait_until(lambda: "listening on port" in a.err, 10), a.err
            ports = {(h, p) for h, p in listening() if p == port}
            assert ports == {(addr, port)}, ports
            if extra:
                assert "every address, --rdzv-bind-all" in a.err, a.err
        finally:
            a.cleanup()
