"""Elastic jobs (--nnodes MIN:MAX, issue 17): a restart after a lost node goes on with the nodes
left, renumbered densely (node 2 becomes node 1), and a node that comes back waits for the next
restart round, where it is admitted. A fixed-size job (--nnodes N) still waits for the lost node
and fails at the join timeout, as before. Bad --nnodes values exit 2 with the value named.
Real agents, sockets and signals on loopback; the workers are tests/launcher/progs/worker.py."""
import json, os, re, signal, subprocess

import pytest

from harness import LF_TRAIN, PY, WORKER, Agent, free_port, live_pids_with, unique_marker, wait_until

EXIT_CONFIG, EXIT_RDZV = 2, 10


def all_envs(agent):
    """Every ENV line its workers printed, in order (one per worker and generation)."""
    return [json.loads(m.group(1)) for m in re.finditer(r"\] ENV (.*)$", agent.out, re.M)]


def worker_pid(marker, rank, generation):
    for pid in live_pids_with(marker):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if f"RANK={rank}".encode() in env and f"TORCHELASTIC_RESTART_COUNT={generation}".encode() in env:
            return pid
    return None


def proc_env(pid):
    env = open(f"/proc/{pid}/environ", "rb").read().decode().split("\0")
    return dict(kv.split("=", 1) for kv in env if "=" in kv)


def test_a_lost_node_leaves_no_gap_and_a_returning_node_is_admitted_at_the_next_round(tmp_path, agents):
    marker = unique_marker("elastic")
    port = free_port()
    args = ["launch", "--nnodes", "2:3", "--nproc-per-node", "1", "--master-port", str(port), "--max-restarts", "2",
            "--last-call", "1", "--join-timeout", "30"]
    worker = ["--", PY, WORKER, "--marker", marker, "--sleep", "60", "--quick-from-generation", "2"]
    nodes = [Agent(args + ["--node-rank", str(r)] + worker, tmp=str(tmp_path)) for r in range(3)]
    agents.extend(nodes)
    assert wait_until(lambda: len(live_pids_with(marker)) == 3, 30), [n.err for n in nodes]
    nodes[1].kill(signal.SIGKILL)  # for good: nobody restarts it
    # Generation 1 on the two nodes left: node 2 is node 1 now (it once failed the job: "node rank 2
    # requested, but the job has 2 nodes").
    assert wait_until(lambda: "(generation 1, was node 2 of 3)" in nodes[2].err, 30), nodes[0].err + nodes[2].err
    assert "node 1 of 2: ranks 1..1 of 2 (generation 1, was node 2 of 3)" in nodes[2].err, nodes[2].err
    assert "node 2 is node 1 from generation 1 (--nnodes 2:3: ranks are dense)" in nodes[0].err, nodes[0].err
    assert "generation 1 runs on 2 node(s), world size 2 (the job's first round had 3" in nodes[0].err, nodes[0].err
    assert wait_until(lambda: worker_pid(marker, 0, 1) and worker_pid(marker, 1, 1), 20)
    # (read from /proc: a worker stopped by a restart may not get its ENV line out first)
    for rank in (0, 1):
        env = proc_env(worker_pid(marker, rank, 1))
        assert (env["GROUP_RANK"], env["WORLD_SIZE"], env["LF_BASE_WORLD_SIZE"]) == (str(rank), "2", "3"), env
    # The node comes back (its scheduler's retry, the same NODE_RANK): parked while the job runs.
    back = Agent(args + ["--node-rank", "1"] + worker, tmp=str(tmp_path))
    agents.append(back)
    assert wait_until(lambda: "it joins at the next restart" in nodes[0].err, 20), nodes[0].err + back.err
    assert back.poll() is None and not all_envs(back), back.err
    # The next restart round (a worker of generation 1 dies) admits it: three nodes again.
    victim = worker_pid(marker, 0, 1)
    assert victim
    os.kill(victim, signal.SIGKILL)
    for n in (nodes[0], nodes[2], back):
        assert n.wait(60) == 0, n.err
    assert "the node that asked for rank 1 (NODE_RANK) is node 2 from generation 2" in nodes[0].err, nodes[0].err
    gen2 = [e for n in (nodes[0], nodes[2], back) for e in all_envs(n) if e["TORCHELASTIC_RESTART_COUNT"] == "2"]
    assert sorted(e["GROUP_RANK"] for e in gen2) == ["0", "1", "2"], gen2
    assert {(e["WORLD_SIZE"], e["GROUP_WORLD_SIZE"], e["LF_BASE_WORLD_SIZE"]) for e in gen2} == {("3", "3", "3")}
    (mine,) = [e for e in all_envs(back)]
    assert mine["GROUP_RANK"] == "2" and mine["RANK"] == "2", mine


def test_the_first_round_is_dense_too_when_a_node_rank_never_came(tmp_path, agents):
    """--nnodes 2:3 and nodes 0 and 2 only: the job starts after the last call on two nodes,
    node 2 as node 1 (once "node rank 2 requested, but the job has 2 nodes", exit 10)."""
    port = free_port()
    args = ["launch", "--nnodes", "2:3", "--master-port", str(port), "--last-call", "1"]
    nodes = [Agent(args + ["--node-rank", str(r), "--", PY, WORKER], tmp=str(tmp_path)) for r in (0, 2)]
    agents.extend(nodes)
    for n in nodes:
        assert n.wait(30) == 0, n.err
    assert "the node that asked for rank 2 (NODE_RANK) is node 1 from generation 0" in nodes[0].err, nodes[0].err
    assert "node 1 of 2: ranks 1..1 of 2 (generation 0)" in nodes[1].err, nodes[1].err


def test_a_fixed_size_job_still_waits_for_the_lost_node(tmp_path, agents):
    """--nnodes 3 (no MIN:MAX): the restart round needs node 1 back; without it the survivors fail
    at the join timeout, as before; no renumbering, no LF_BASE_WORLD_SIZE."""
    marker = unique_marker("fixed")
    port = free_port()
    args = ["launch", "--nnodes", "3", "--nproc-per-node", "1", "--master-port", str(port), "--max-restarts", "1",
            "--join-timeout", "4"]
    nodes = [Agent(args + ["--node-rank", str(r), "--", PY, WORKER, "--marker", marker, "--sleep", "60"],
                   tmp=str(tmp_path)) for r in range(3)]
    agents.extend(nodes)
    assert wait_until(lambda: len(live_pids_with(marker)) == 3, 30), [n.err for n in nodes]
    nodes[1].kill(signal.SIGKILL)
    for n in (nodes[0], nodes[2]):
        assert n.wait(40) == EXIT_RDZV, n.err
        assert "rendezvous timed out after 4s: 2 of 3 nodes joined" in n.err, n.err
    assert "ranks are dense" not in nodes[0].err and "generation 1" not in nodes[2].err
    assert all(e["LF_BASE_WORLD_SIZE"] is None for n in nodes for e in all_envs(n))


@pytest.mark.parametrize("value, expected", [
    ("3:2", "MIN must not exceed MAX (MIN 3 > MAX 2); write --nnodes 2:3"),
    ("0", "must be N or MIN:MAX with N >= 1 (seen '0'"),
    ("0:2", "(seen '0'"),
    ("two", "(seen 'two'"),
    ("2:x", "(seen 'x'"),
    (":3", "(seen ''"),
    ("1:2:3", "(seen '2:3'"),
])
def test_bad_nnodes_exit_2_naming_the_value(value, expected):
    for how in ("flag", "env"):
        env = dict(os.environ, NNODES=value) if how == "env" else dict(os.environ)
        if how == "flag":
            env.pop("NNODES", None)
        argv = [LF_TRAIN, "launch"] + (["--nnodes", value] if how == "flag" else []) + ["--", "true"]
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20)
        assert r.returncode == EXIT_CONFIG, (how, r.stderr)
        assert expected in r.stderr and value in r.stderr, (how, r.stderr)
