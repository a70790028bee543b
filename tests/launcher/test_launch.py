"""lf-train launch across processes on loopback: environment, failures, signals, restarts."""
import os, re, signal, socket, time

import pytest

from harness import (Agent, PY, WORKER, events, free_port, live_pids_with, unique_marker, wait_no_survivors,
                     wait_until)

EXIT_CONFIG, EXIT_RDZV, EXIT_NETWORK, EXIT_ABORTED, EXIT_WORKER_FAILED = 2, 10, 11, 13, 14


def two_nodes(tmp_path, worker_args, nproc=2, extra=(), env=None, node1_extra=()):
    port = free_port()
    base = ["launch", "--nnodes", "2", "--nproc-per-node", str(nproc), "--master-port", str(port),
            "--join-timeout", "30", *extra]
    node0 = Agent(base + ["--node-rank", "0", "--event-log", str(tmp_path / "events.jsonl"), "--",
                          PY, WORKER, *worker_args], env=env, tmp=str(tmp_path))
    node1 = Agent(base + ["--node-rank", "1", *node1_extra, "--", PY, WORKER, *worker_args], env=env,
                  tmp=str(tmp_path))
    return port, node0, node1


def test_two_nodes_two_workers_get_the_torchrun_environment(tmp_path, agents):
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO", "RDZV_ID": "envjob"}
    env.pop("OMP_NUM_THREADS", None)
    os.environ.pop("OMP_NUM_THREADS", None)
    port, n0, n1 = two_nodes(tmp_path, [], env=env, extra=("--max-restarts", "2"))
    agents += [n0, n1]
    assert n0.wait(30) == 0, n0.err
    assert n1.wait(30) == 0, n1.err
    envs = {**n0.envs(), **n1.envs()}
    assert sorted(envs) == [0, 1, 2, 3]
    store_ports = {e["MASTER_PORT"] for e in envs.values()}
    assert len(store_ports) == 1 and store_ports != {str(port)}, "workers' store port must differ from rendezvous"
    for rank, e in envs.items():
        node = rank // 2
        assert e["RANK"] == str(rank)
        assert e["LOCAL_RANK"] == str(rank % 2)
        assert e["WORLD_SIZE"] == "4"
        assert e["LOCAL_WORLD_SIZE"] == "2"
        assert e["GROUP_RANK"] == str(node)
        assert e["GROUP_WORLD_SIZE"] == "2"
        assert e["ROLE_RANK"] == str(rank)
        assert e["ROLE_WORLD_SIZE"] == "4"
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert e["TORCHELASTIC_MAX_RESTARTS"] == "2"
        assert e["TORCHELASTIC_RUN_ID"] == "envjob"
        assert e["OMP_NUM_THREADS"] == "1"
        assert e["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert e["NCCL_DEBUG"] == "INFO"
        assert e["LF_RDZV_PORT"] == str(port)
        assert e["LF_HEARTBEAT_FD"] == "3"
    assert_scratch_per_node_and_gone(envs)


def assert_scratch_per_node_and_gone(envs):
    """LF_NODE_SCRATCH: one folder per node (its workers share it, another node's differs), unique
    to the agent, and removed when the agent exits however the job ended."""
    per_node = {}
    for rank, e in envs.items():
        per_node.setdefault(int(e["GROUP_RANK"]), set()).add(e["LF_NODE_SCRATCH"])
    assert all(len(s) == 1 for s in per_node.values()), per_node
    folders = [s.pop() for s in per_node.values()]
    assert len(set(folders)) == len(folders), folders
    assert all(re.search(r"/lf-train-\d+-node-\w{6}$", f) for f in folders), folders
    assert not [f for f in folders if os.path.exists(f)], "the node's scratch folder outlived its agent"


def test_worker_exit_code_3_stops_every_worker_on_both_nodes(tmp_path, agents):
    marker = unique_marker("exit3")
    _, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--sleep", "120", "--fail-rank", "3", "--code", "3",
                                     "--fail-after", "1"])
    agents += [n0, n1]
    assert n1.wait(30) == EXIT_WORKER_FAILED, n1.err
    assert n0.wait(30) == EXIT_ABORTED, n0.err
    assert "worker rank 3 exited with code 3" in n1.err
    assert "worker rank 3" in n0.err and "exited with code 3" in n0.err
    assert wait_no_survivors(marker), live_pids_with(marker)
    assert_scratch_per_node_and_gone({**n0.envs(), **n1.envs()})


def test_worker_killed_by_signal_is_named(tmp_path, agents):
    marker = unique_marker("sig")
    _, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--sleep", "120", "--fail-rank", "0", "--kill-self"])
    agents += [n0, n1]
    assert n0.wait(30) == EXIT_WORKER_FAILED
    assert n1.wait(30) == EXIT_ABORTED
    assert "killed by signal 9" in n0.err
    assert wait_no_survivors(marker)


def test_sigkill_of_one_agent_aborts_the_other_node(tmp_path, agents):
    marker = unique_marker("agentkill")
    _, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--sleep", "120"])
    agents += [n0, n1]
    assert wait_until(lambda: len(live_pids_with(marker)) == 4, 20)
    n1.kill(signal.SIGKILL)
    assert n0.wait(15) == EXIT_ABORTED, n0.err
    assert "lost the agent of node 1" in n0.err
    assert wait_no_survivors(marker), "workers of the killed agent must die with it (PR_SET_PDEATHSIG)"


def test_sigstop_of_one_agent_is_detected_by_missed_heartbeats(tmp_path, agents):
    marker = unique_marker("agentstop")
    _, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--sleep", "120"])
    agents += [n0, n1]
    assert wait_until(lambda: len(live_pids_with(marker)) == 4, 20)
    t_stop = time.time()
    n1.kill(signal.SIGSTOP)
    assert n0.wait(15) == EXIT_ABORTED, n0.err
    ev = events(tmp_path / "events.jsonl")
    missed = [e for e in ev if e["event"] == "heartbeat_missed"]
    stopped = [e for e in ev if e["event"] == "all_stopped"]
    assert missed and stopped, ev
    detection = missed[0]["t"] - t_stop
    assert detection <= 15, f"detection took {detection:.1f}s"
    # Node 0's log says why (issue 29: it once said "lost the agent of node 1 (...): closed").
    assert "lost the agent of node 1" in n0.err and "missed heartbeats: no message for" in n0.err, n0.err
    assert "): closed" not in n0.err, n0.err
    # node 0's workers are gone; the frozen agent's come down as soon as it runs again.
    n1.kill(signal.SIGCONT)
    assert n1.wait(15) in (EXIT_NETWORK, EXIT_ABORTED), n1.err
    assert wait_no_survivors(marker), live_pids_with(marker)


def test_torchrun_spellings_of_the_flags_work(tmp_path, agents):
    a = Agent(["launch", "--nproc_per_node", "2", "--master_port", str(free_port()), "--max_restarts", "0",
               "--rdzv_id", "spelt", "--", PY, WORKER], tmp=str(tmp_path))
    agents.append(a)
    assert a.wait(30) == 0, a.err
    envs = a.envs()
    assert sorted(envs) == [0, 1] and {e["TORCHELASTIC_RUN_ID"] for e in envs.values()} == {"spelt"}


def test_max_restarts_recovers_from_one_failure(tmp_path, agents):
    marker = unique_marker("restart")
    _, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--fail-rank", "1", "--code", "1",
                                     "--fail-generation", "0"], extra=("--max-restarts", "2"))
    agents += [n0, n1]
    assert n0.wait(40) == 0, n0.err
    assert n1.wait(40) == 0, n1.err
    gens = {e["TORCHELASTIC_RESTART_COUNT"] for e in n0.envs().values()}
    assert "1" in n0.out and gens == {"1"}, n0.out
    assert "restarting" in n0.err


def test_a_late_exit_of_the_old_generation_is_not_charged_to_the_new_one(tmp_path, agents):
    """Generation 0: rank 0 starts a child in a session of its own that keeps rank 0's stdout
    open, and rank 1 fails. The stop's SIGTERM ends rank 0, but its exit waits out the 2 s
    pipe grace, past the restart. Generation 1 is healthy and must end with exit 0 (the late
    report of rank 0's SIGTERM once failed it, exit 14)."""
    marker = unique_marker("lateexit")
    script = f"""
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  if [ "$LOCAL_RANK" = 0 ]; then setsid bash -c "exec -a {marker} sleep 20" & sleep 60; else sleep 1; exit 1; fi
else
  sleep 3; echo "generation 1 rank $RANK done"
fi"""
    a = Agent(["launch", "--nproc-per-node", "2", "--max-restarts", "1", "--master-port", str(free_port()), "--",
               "bash", "-c", script], tmp=str(tmp_path))
    agents.append(a)
    try:
        assert a.wait(40) == 0, a.err
        assert "generation 1 rank 1 done" in a.out, a.out
    finally:
        for pid in live_pids_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_late_node_of_an_elastic_job_waits_for_the_next_round_instead_of_failing_it(tmp_path, agents):
    """--nnodes 1:3 started with one node: a node arriving while it runs fits, so it is parked
    for the next round (a restart) and the running job goes on; when the job ends first, the
    late node is told so (it once failed the job: "more nodes than --nnodes 3")."""
    port = free_port()
    args = ["launch", "--nnodes", "1:3", "--nproc-per-node", "1", "--master-port", str(port), "--last-call", "1"]
    first = Agent(args + ["--node-rank", "0", "--", PY, WORKER, "--sleep", "5"], tmp=str(tmp_path))
    agents.append(first)
    assert wait_until(lambda: "ranks 0..0 of 1" in first.err, 20), first.err
    late = Agent(args + ["--", PY, WORKER, "--sleep", "5"], tmp=str(tmp_path))
    agents.append(late)
    assert first.wait(40) == 0, first.err
    assert late.wait(20) == EXIT_RDZV, late.err
    assert "the job ended before a restart let this node in" in late.err, late.err
    assert "it joins at the next restart" in first.err, first.err


def test_a_console_that_does_not_read_does_not_get_a_healthy_node_declared_lost(tmp_path, agents):
    """Node 1's stdout is a pipe nobody reads for 6 s (a paused `less`, Ctrl-S) while its
    workers print ~250 KB. The console has a writer thread of its own, so the agent keeps
    heartbeating (timeout 3 s) and the job ends well once the pipe is read (it once blocked
    the io thread: node 1 was declared lost, exit 13 and 11)."""
    import subprocess
    from harness import LF_TRAIN
    port = free_port()
    script = 'for i in $(seq 1 4000); do echo "line $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; done; sleep 8'
    base = ["launch", "--nnodes", "2", "--master-port", str(port), "--join-timeout", "30"]
    n0 = Agent(base + ["--node-rank", "0", "--", "bash", "-c", script], tmp=str(tmp_path))
    agents.append(n0)
    env = dict(os.environ)
    env.pop("NNODES", None)
    n1 = subprocess.Popen([LF_TRAIN, *base, "--node-rank", "1", "--", "bash", "-c", script], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(6)  # nobody reads node 1's console meanwhile (heartbeat timeout: 3 s)
        out, err = n1.communicate(timeout=60)
    finally:
        if n1.poll() is None:
            n1.kill()
    assert n0.wait(60) == 0, n0.err
    assert n1.returncode == 0, err.decode()[-3000:]
    assert out.decode().count("] line ") == 4000, "every line reaches the console in the end"


def test_restarted_agent_rejoins_after_its_predecessor_died(tmp_path, agents):
    marker = unique_marker("rejoin")
    port, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--sleep", "3"], extra=("--max-restarts", "1"))
    agents += [n0, n1]
    assert wait_until(lambda: len(live_pids_with(marker)) == 4, 20)
    n1.kill(signal.SIGKILL)
    # The scheduler's retry: the same command on the same node.
    again = Agent(["launch", "--nnodes", "2", "--nproc-per-node", "2", "--master-port", str(port), "--node-rank", "1",
                   "--join-timeout", "30", "--max-restarts", "1", "--", PY, WORKER, "--marker", marker, "--sleep", "3"],
                  tmp=str(tmp_path))
    agents.append(again)
    assert again.wait(40) == 0, again.err
    assert n0.wait(40) == 0, n0.err
    assert {e["TORCHELASTIC_RESTART_COUNT"] for e in again.envs().values()} == {"1"}


def test_second_live_agent_claiming_a_live_rank_is_refused(tmp_path, agents):
    marker = unique_marker("dupe-live")
    port, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--sleep", "10"])
    agents += [n0, n1]
    assert wait_until(lambda: len(live_pids_with(marker)) == 4, 20)
    intruder = Agent(["launch", "--nnodes", "2", "--nproc-per-node", "2", "--master-port", str(port), "--node-rank",
                      "1", "--", PY, WORKER], tmp=str(tmp_path))
    agents.append(intruder)
    assert intruder.wait(20) == EXIT_RDZV
    assert "node rank 1 is held by a live agent" in intruder.err
    assert n0.poll() is None and n1.poll() is None, "the running job must not notice the intruder"
    assert n0.wait(30) == 0 and n1.wait(30) == 0


def test_ctrl_c_on_node_0_while_it_waits_for_the_others_ends_at_once(tmp_path, agents):
    """Node 0 waits for node 1 to join; Ctrl-C there ends the job at once (it used to wait
    stop-grace + 2 heartbeat timeouts + 5 s, about 16 s, for a stop nobody had to do)."""
    a = Agent(["launch", "--nnodes", "2", "--node-rank", "0", "--master-port", str(free_port()), "--", PY, WORKER],
              tmp=str(tmp_path))
    agents.append(a)
    assert wait_until(lambda: "listening on port" in a.err, 10), a.err
    time.sleep(0.3)
    a.kill(signal.SIGINT)
    assert a.wait(8) == 128 + signal.SIGINT, a.err
    assert "again: leaving now" not in a.err


def test_ctrl_c_while_the_agent_is_leaving_means_now(tmp_path, agents):
    """Node 0 dies (SIGKILL): node 1's agent leaves, stopping workers that ignore SIGTERM, so
    it would wait out --stop-grace 30 before its SIGKILL. A Ctrl-C then means now (it was
    ignored once the agent was leaving)."""
    marker = unique_marker("leaving")
    port = free_port()
    args = ["launch", "--nnodes", "2", "--stop-grace", "30", "--master-port", str(port), "--", PY, WORKER, "--marker",
            marker, "--sleep", "60", "--ignore-sigterm", "--lines", "1"]
    n0 = Agent(args[:1] + ["--node-rank", "0"] + args[1:], tmp=str(tmp_path))
    n1 = Agent(args[:1] + ["--node-rank", "1"] + args[1:], tmp=str(tmp_path))
    agents += [n0, n1]
    # A worker prints its line once it ignores SIGTERM.
    assert wait_until(lambda: "line-00000" in n0.out and "line-00000" in n1.out, 20), n0.err + n1.err
    n0.kill(signal.SIGKILL)
    assert wait_until(lambda: "rendezvous server" in n1.err and "lost" in n1.err or "no message" in n1.err, 15), n1.err
    time.sleep(0.5)
    n1.kill(signal.SIGINT)
    assert n1.wait(10) == 128 + signal.SIGINT, n1.err
    assert "again: leaving now" in n1.err, n1.err
    for pid in live_pids_with(marker):  # node 0's worker lost its agent (PDEATHSIG) too
        os.kill(pid, signal.SIGKILL)


def test_sigint_stops_workers_and_grandchildren(tmp_path, agents):
    marker = unique_marker("sigint")
    port = free_port()
    a = Agent(["launch", "--nproc-per-node", "2", "--master-port", str(port), "--", PY, WORKER, "--marker", marker,
               "--sleep", "120", "--grandchild"], tmp=str(tmp_path))
    agents.append(a)
    assert wait_until(lambda: len(live_pids_with(marker)) == 4, 20)  # 2 workers + 2 grandchildren
    a.kill(signal.SIGINT)
    assert a.wait(20) == 130
    assert wait_no_survivors(marker), live_pids_with(marker)


@pytest.mark.parametrize("ignored", [False, True])
def test_sighup_stops_the_job_unless_nohup_ignores_it(tmp_path, agents, ignored):
    """A closed terminal (SIGHUP) stops the job as SIGTERM does, and the node's scratch folder goes with
    it; under nohup (SIGHUP ignored when lf-train starts) the job runs on."""
    marker = unique_marker("sighup")
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN if ignored else signal.SIG_DFL)
    try:  # the agent inherits the disposition, as from nohup
        a = Agent(["launch", "--nproc-per-node", "2", "--master-port", str(free_port()), "--", PY, WORKER,
                   "--marker", marker, "--sleep", "120"], tmp=str(tmp_path))
    finally:
        signal.signal(signal.SIGHUP, old)
    agents.append(a)
    assert wait_until(lambda: len(live_pids_with(marker)) == 2 and len(a.envs()) == 2, 20), a.err
    scratch = a.envs()[0]["LF_NODE_SCRATCH"]
    assert os.path.isdir(scratch), scratch
    a.kill(signal.SIGHUP)
    if ignored:
        time.sleep(1.5)
        assert a.poll() is None and len(live_pids_with(marker)) == 2, a.err
        a.kill(signal.SIGTERM)
    assert a.wait(20) == 128 + (signal.SIGTERM if ignored else signal.SIGHUP), a.err
    assert wait_no_survivors(marker), live_pids_with(marker)
    assert not os.path.exists(scratch), "the node's scratch folder outlived its agent"


@pytest.mark.parametrize("ending", ["success", "failure"])
def test_nothing_a_worker_started_outlives_the_job(tmp_path, agents, ending):
    """A worker leaves a daemon in a session of its own (setsid: outside its process group)
    and a plain background child, then ends (exit 0, or exit 1 with no restart left). When the
    job is over, neither is alive (they once survived: only the process groups were killed)."""
    marker = unique_marker("leftover")
    code = 0 if ending == "success" else 1
    script = (f'setsid bash -c "exec -a {marker}-daemon sleep 60" & '
              f'bash -c "exec -a {marker}-child sleep 60" & sleep 1; exit {code}')
    a = Agent(["launch", "--nproc-per-node", "2", "--master-port", str(free_port()), "--", "bash", "-c", script],
              tmp=str(tmp_path))
    agents.append(a)
    try:
        assert a.wait(30) == (0 if code == 0 else EXIT_WORKER_FAILED), a.err
        assert wait_no_survivors(marker), live_pids_with(marker)
    finally:
        for pid in live_pids_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_then_sigkill_after_grace(tmp_path, agents):
    marker = unique_marker("grace")
    a = Agent(["launch", "--master-port", str(free_port()), "--stop-grace", "1", "--", PY, WORKER, "--marker", marker,
               "--sleep", "120", "--ignore-sigterm"], tmp=str(tmp_path))
    agents.append(a)
    assert wait_until(lambda: len(live_pids_with(marker)) == 1, 20)
    time.sleep(0.3)  # let the worker install its SIGTERM handler
    a.kill(signal.SIGTERM)
    assert a.wait(20) == 143
    assert "SIGKILL" in a.err
    assert wait_no_survivors(marker)


def test_output_is_whole_prefixed_lines_and_log_files(tmp_path, agents):
    log_dir = tmp_path / "logs"
    a = Agent(["launch", "--nproc-per-node", "2", "--master-port", str(free_port()), "--rdzv-id", "lines",
               "--log-dir", str(log_dir), "--", PY, WORKER, "--lines", "3000"], tmp=str(tmp_path))
    agents.append(a)
    assert a.wait(30) == 0, a.err
    import re
    lines = [l for l in a.out.splitlines() if "line-" in l]
    assert len(lines) == 6000
    assert all(re.fullmatch(r"\[rank [01]\] line-\d{5} x{50}", l) for l in lines)
    for rank in (0, 1):
        f = log_dir / "lines" / "attempt_0" / str(rank) / "stdout.log"
        assert sum(1 for l in open(f) if l.startswith("line-")) == 3000


def test_redirect_sends_output_only_to_files(tmp_path, agents):
    log_dir = tmp_path / "logs"
    a = Agent(["launch", "--master-port", str(free_port()), "--redirect", "--log-dir", str(log_dir), "--", PY, WORKER,
               "--lines", "5"], tmp=str(tmp_path))
    agents.append(a)
    assert a.wait(30) == 0, a.err
    assert "line-" not in a.out
    assert "line-00004" in open(log_dir / "none" / "attempt_0" / "0" / "stdout.log").read()


def test_worker_heartbeat_timeout_counts_as_failure(tmp_path, agents):
    marker = unique_marker("hb")
    a = Agent(["launch", "--master-port", str(free_port()), "--worker-heartbeat-timeout", "1", "--", PY, WORKER,
               "--marker", marker, "--heartbeat-then-hang"], tmp=str(tmp_path))
    agents.append(a)
    assert a.wait(20) == EXIT_WORKER_FAILED
    assert "no heartbeat" in a.err
    assert wait_no_survivors(marker)


def test_a_worker_that_never_heartbeats_is_never_taken_for_hung(tmp_path, agents):
    a = Agent(["launch", "--master-port", str(free_port()), "--worker-heartbeat-timeout", "0.5", "--", PY, WORKER,
               "--sleep", "2"], tmp=str(tmp_path))
    agents.append(a)
    assert a.wait(20) == 0, a.err


def test_a_stalled_worker_on_node_1_is_named_in_node_0s_log(tmp_path, agents):
    """Alive (liveness beats) but past its progress deadline: a hang. Node 1's agent reports it;
    the job stops on both nodes, and node 0's log names node 1's rank, pid, phase and step."""
    marker = unique_marker("stall")
    _, n0, n1 = two_nodes(tmp_path, ["--marker", marker, "--sleep", "120", "--stall-rank", "3"])
    agents += [n0, n1]
    assert n1.wait(30) == EXIT_WORKER_FAILED, n1.err
    assert n0.wait(30) == EXIT_ABORTED, n0.err
    for text in (n0.err, n1.err):
        assert "worker rank 3" in text and "hung (pid " in text and "node 1" in text, text
        assert "no progress for" in text and "phase training, step 7" in text, text
    assert wait_no_survivors(marker)


def test_elastic_min_max_starts_with_the_nodes_present(tmp_path, agents):
    port = free_port()
    args = ["launch", "--nnodes", "1:3", "--nproc-per-node", "1", "--master-port", str(port), "--last-call", "1"]
    n0 = Agent(args + ["--node-rank", "0", "--", PY, WORKER], tmp=str(tmp_path))
    n1 = Agent(args + ["--master-addr", "127.0.0.1", "--", PY, WORKER], tmp=str(tmp_path))
    agents += [n0, n1]
    assert n0.wait(30) == 0 and n1.wait(30) == 0, n0.err + n1.err
    envs = {**n0.envs(), **n1.envs()}
    assert sorted(envs) == [0, 1] and {e["WORLD_SIZE"] for e in envs.values()} == {"2"}


def test_standalone_rdzv_server_and_rankless_agents(tmp_path, agents):
    port = free_port()
    server = Agent(["rdzv-server", "--nnodes", "2", "--port", str(port)], tmp=str(tmp_path))
    agents.append(server)
    args = ["launch", "--nnodes", "2", "--master-port", str(port), "--", PY, WORKER]
    a, b = Agent(args, tmp=str(tmp_path)), Agent(args, tmp=str(tmp_path))
    agents += [a, b]
    assert a.wait(30) == 0 and b.wait(30) == 0, a.err + b.err
    assert server.wait(10) == 0, server.err
    assert sorted({**a.envs(), **b.envs()}) == [0, 1]
