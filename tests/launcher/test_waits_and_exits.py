"""Waits that say what they wait for, a job without NODE_RANK that decides who hosts, and exit
codes that say what happened: a worker's configuration/data error (exit 2) is never restarted
and ends every node with 2, the worker's own code in every node's message."""
import os, time

from harness import Agent, PY, WORKER, events, free_port, live_pids_with, unique_marker, wait_no_survivors, wait_until

EXIT_CONFIG, EXIT_RDZV, EXIT_NETWORK = 2, 10, 11


def launch(tmp_path, *args, env=None):
    return Agent(["launch", *args], env=env, tmp=str(tmp_path))


def test_node_0_says_who_it_waits_for_every_few_seconds(tmp_path, agents):
    port = free_port()
    n0 = launch(tmp_path, "--nnodes", "3", "--node-rank", "0", "--master-port", str(port), "--join-timeout", "6",
                "--status-interval", "1", "--", PY, WORKER)
    agents.append(n0)
    assert n0.wait(20) == EXIT_RDZV
    lines = [l for l in n0.err.splitlines() if "rendezvous: 1 of 3 nodes joined (node 0 on host" in l]
    assert len(lines) >= 3, n0.err
    assert "waiting for nodes 1, 2" in lines[0], lines[0]
    assert " s left" in lines[0] and f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port}" in lines[0], lines[0]
    assert f"can reach TCP port {port}" in lines[0], lines[0]
    assert "loopback address" in lines[0], lines[0]


def test_a_joined_node_hears_who_is_still_missing(tmp_path, agents):
    port = free_port()
    args = ["--nnodes", "3", "--master-port", str(port), "--join-timeout", "5", "--status-interval", "1"]
    n0 = launch(tmp_path, *args, "--node-rank", "0", "--", PY, WORKER)
    n2 = launch(tmp_path, *args, "--node-rank", "2", "--", PY, WORKER)
    agents += [n0, n2]
    assert n2.wait(20) == EXIT_RDZV and n0.wait(20) == EXIT_RDZV
    assert "rendezvous: 2 of 3 nodes joined" in n2.err and "waiting for node 1," in n2.err, n2.err
    assert "rendezvous: 2 of 3 nodes joined" in n0.err, n0.err


def test_a_node_that_cannot_reach_the_server_says_so_while_it_retries(tmp_path, agents):
    port = free_port()
    n1 = launch(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-port", str(port), "--join-timeout", "8",
                "--status-interval", "1", "--", PY, WORKER)
    agents.append(n1)
    assert n1.wait(20) == EXIT_NETWORK
    waiting = [l for l in n1.err.splitlines() if f"rendezvous: waiting for the server at 127.0.0.1:{port}" in l]
    assert len(waiting) >= 2, n1.err
    assert "s left" in waiting[0] and "NODE_RANK=0" in waiting[0], waiting[0]


def test_elastic_job_without_node_rank_hosts_on_master_addr(tmp_path, agents):
    """--nnodes 1:2, no NODE_RANK, MASTER_ADDR this host: the agent hosts the rendezvous
    itself (it once started no server and waited 300 s in silence)."""
    a = launch(tmp_path, "--nnodes", "1:2", "--last-call", "1", "--master-port", str(free_port()), "--", PY, WORKER)
    agents.append(a)
    assert a.wait(30) == 0, a.err
    assert "this node hosts the rendezvous server" in a.err, a.err
    assert sorted(a.envs()) == [0]


def test_two_nodes_without_node_rank_agree_on_who_hosts(tmp_path, agents):
    port = free_port()
    args = ["--nnodes", "2", "--master-port", str(port), "--", PY, WORKER]
    a, b = launch(tmp_path, *args), launch(tmp_path, *args)
    agents += [a, b]
    assert a.wait(30) == 0 and b.wait(30) == 0, a.err + b.err
    hosts = [n for n in (a, b) if "this node hosts the rendezvous server" in n.err]
    joins = [n for n in (a, b) if "joining it" in n.err or "joining the server there" in n.err]
    assert len(hosts) == 1 and len(joins) == 1, a.err + b.err
    assert sorted({**a.envs(), **b.envs()}) == [0, 1]


def test_a_worker_config_error_is_not_restarted_and_every_node_exits_2(tmp_path, agents):
    marker = unique_marker("exit2")
    port = free_port()
    base = ["--nnodes", "2", "--nproc-per-node", "2", "--master-port", str(port), "--max-restarts", "3",
            "--join-timeout", "30"]
    worker = [PY, WORKER, "--marker", marker, "--sleep", "120", "--fail-rank", "3", "--code", "2", "--fail-after", "1"]
    n0 = launch(tmp_path, *base, "--node-rank", "0", "--event-log", str(tmp_path / "events.jsonl"), "--", *worker)
    n1 = launch(tmp_path, *base, "--node-rank", "1", "--", *worker)
    agents += [n0, n1]
    assert n1.wait(30) == EXIT_CONFIG, n1.err
    assert n0.wait(30) == EXIT_CONFIG, n0.err
    assert "worker rank 3 exited with code 2 (a configuration or data error: not restarted)" in n1.err, n1.err
    assert "exited with code 2" in n0.err and "worker rank 3" in n0.err, n0.err
    assert "restarting" not in n0.err + n1.err
    assert {e["generation"] for e in events(tmp_path / "events.jsonl")} == {0}
    assert wait_no_survivors(marker), live_pids_with(marker)


def test_other_worker_failures_are_still_restarted(tmp_path, agents):
    a = launch(tmp_path, "--nproc-per-node", "2", "--master-port", str(free_port()), "--max-restarts", "1", "--",
               PY, WORKER, "--fail-rank", "1", "--code", "3", "--fail-generation", "0")
    agents.append(a)
    assert a.wait(40) == 0, a.err
    assert "restarting" in a.err


def test_command_mismatch_names_both_commands(tmp_path, agents):
    port = free_port()
    common = ["--nnodes", "2", "--master-port", str(port), "--join-timeout", "20"]
    n0 = launch(tmp_path, *common, "--node-rank", "0", "--", PY, WORKER, "--sleep", "1")
    time.sleep(0.3)
    n1 = launch(tmp_path, *common, "--node-rank", "1", "--", PY, WORKER, "--sleep", "2")
    agents += [n0, n1]
    assert n1.wait(15) == EXIT_RDZV and n0.wait(15) == EXIT_RDZV
    assert "command: '" in n1.err and "--sleep 1' on node rank 0" in n1.err and "--sleep 2' on node rank 1" in n1.err, \
        n1.err
