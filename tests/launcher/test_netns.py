"""Two hosts with their own addresses (network namespaces joined by a veth pair): the job runs
across them with MASTER_ADDR = host A's address, and a cut link stops both sides by themselves."""
import os, shutil, subprocess, time

import pytest

from netns_pair import sh, two_hosts
from harness import Agent, PY, WORKER, live_pids_with, unique_marker, wait_no_survivors, wait_until

EXIT_ABORTED, EXIT_NETWORK = 13, 11


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
