"""`lf-train doctor` as users run it: on this CPU node, with a config, and across two hosts made
of network namespaces: an interface name that does not exist, a master port in use, a port
blocked between the hosts (iptables), and an output_dir that is node-local on one host (its own
mount namespace)."""
import json, os, shutil, socket, subprocess, time

import pytest

from netns_pair import sh, two_hosts
from harness import LF_TRAIN, free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXIT_FAIL = 2


def doctor(*args, env=None, netns=None, wrap=(), timeout=120):
    cmd = [*wrap, LF_TRAIN, "doctor", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    full = {k: v for k, v in os.environ.items() if k not in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
                                                             "NPROC_PER_NODE", "NCCL_SOCKET_IFNAME")}
    full.update(env or {})
    return subprocess.Popen(cmd, cwd=ROOT, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def checks(out):
    report = json.loads(out)
    return {c["check"]: c for c in report["checks"]}


def run_json(*args, **kw):
    rc, out, err = finish(doctor(*args, "--json", **kw))
    return rc, checks(out), out + err


def test_this_cpu_node_without_config():
    rc, c, text = run_json(env={"MASTER_PORT": str(free_port())})
    assert rc == 0, text
    assert c["gpus"]["status"] == "INFO" and "runs on CPU" in c["gpus"]["detail"], text
    for name in ("shm", "memlock", "nofile", "nccl-ifname", "master-addr", "master-port"):
        assert name in c, (name, text)
    assert c["master-port"]["status"] == "PASS", text
    assert not [x for x in c.values() if x["status"] == "FAIL"], text


def test_text_output_has_a_line_per_check_and_what_to_do():
    rc, out, err = finish(doctor(env={"MASTER_PORT": str(free_port()), "NCCL_SOCKET_IFNAME": "nosuch"}))
    assert rc == EXIT_FAIL, out + err
    assert out.startswith("lf-train doctor: node ? of 1"), out
    assert "\nFAIL  nccl-ifname      NCCL_SOCKET_IFNAME=nosuch matches no interface on this node" in out, out
    assert "-> name an interface that exists here" in out, out
    assert "FAIL: fix the FAIL lines before starting the job" in out, out


def test_with_a_config_every_file_the_job_reads_and_writes(tmp_path):
    rc, c, text = run_json("configs/tiny_cpu.yaml", f"output_dir={tmp_path}/out", env={"MASTER_PORT": str(free_port())})
    assert rc == 0, text
    for name in ("config", "model", "tokenizer", "dataset", "output-dir", "disk-space"):
        assert c[name]["status"] == "PASS", (name, text)
    assert "safetensors" in c["model"]["detail"] or "0 safetensors" in c["model"]["detail"], text
    assert "one checkpoint of this run is ~" in c["disk-space"]["detail"], text
    # The doctor creates nothing (issue 29): no output_dir, no probe left in the folder above it.
    assert not (tmp_path / "out").exists() and not os.listdir(tmp_path), "the doctor left something behind"


def test_config_problems_fail_with_what_to_do(tmp_path):
    rc, c, text = run_json("configs/tiny_cpu.yaml", "dataset=no_such_dataset", f"output_dir={tmp_path}",
                           env={"MASTER_PORT": str(free_port())})
    assert rc == EXIT_FAIL and c["dataset"]["status"] == "FAIL", text
    assert "no_such_dataset" in c["dataset"]["detail"], text
    rc, c, text = run_json("configs/tiny_cpu.yaml", "learning_rat=1e-4", env={"MASTER_PORT": str(free_port())})
    assert rc == EXIT_FAIL and c["config"]["status"] == "FAIL", text
    assert "did you mean learning_rate" in c["config"]["detail"], text
    rc, c, text = run_json("configs/tiny_cpu.yaml", "output_dir=/proc/lf-doctor-cannot-write",
                           env={"MASTER_PORT": str(free_port())})
    assert rc == EXIT_FAIL and c["output-dir"]["status"] == "FAIL", text


# ---- two hosts ---------------------------------------------------------------------------------

@pytest.fixture
def hosts():
    with two_hosts("lfd", 214) as h:
        yield h


def job_env(hosts, rank, port, **extra):
    return {"NNODES": "2", "NODE_RANK": str(rank), "MASTER_ADDR": hosts["addr_a"], "MASTER_PORT": str(port), **extra}


def test_an_interface_name_that_does_not_exist(hosts):
    rc, c, text = run_json(env=job_env(hosts, 1, 29400, NCCL_SOCKET_IFNAME="eth9"), netns=hosts["b"])
    assert rc == EXIT_FAIL and c["nccl-ifname"]["status"] == "FAIL", text
    assert f"interfaces: {hosts['vb']}, lo" in c["nccl-ifname"]["detail"], text
    rc, c, text = run_json(env=job_env(hosts, 1, 29400, NCCL_SOCKET_IFNAME=hosts["vb"][:4]), netns=hosts["b"])
    assert c["nccl-ifname"]["status"] == "PASS" and hosts["vb"] in c["nccl-ifname"]["detail"], text


def test_a_master_port_in_use_names_the_process(hosts):
    port = 29400
    holder = subprocess.Popen(["ip", "netns", "exec", hosts["a"], "python3", "-c",
                               f"import socket, time; s = socket.socket(); s.bind(('{hosts['addr_a']}', {port})); "
                               "s.listen(); print('bound', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "bound"
        for extra in ((), ("--all-nodes", "--timeout", "5")):
            rc, c, text = run_json(*extra, env=job_env(hosts, 0, port), netns=hosts["a"])
            assert rc == EXIT_FAIL and c["master-port"]["status"] == "FAIL", text
            assert f"MASTER_PORT {port} is in use on node 0 by pid" in c["master-port"]["detail"], text
            assert "(python3)" in c["master-port"]["detail"], text
    finally:
        holder.kill()
        holder.wait()


def test_a_blocked_master_port_is_no_answer_not_a_refusal(hosts):
    port = 29400
    # Nothing listens on node 0: a refusal means the host is reachable (fine before the job).
    rc, c, text = run_json("--connect-timeout", "1", env=job_env(hosts, 1, port), netns=hosts["b"])
    assert c["master-port"]["status"] == "PASS" and "nothing listens there yet" in c["master-port"]["detail"], text
    sh("ip", "netns", "exec", hosts["a"], "iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP")
    rc, c, text = run_json("--connect-timeout", "1", env=job_env(hosts, 1, port), netns=hosts["b"])
    assert rc == EXIT_FAIL and c["master-port"]["status"] == "FAIL", text
    assert "no answer within 1 s" in c["master-port"]["detail"], text


def all_nodes(hosts, port, *args, wrap_b=(), env_extra=None):
    common = ("--all-nodes", "--timeout", "20", "--connect-timeout", "1", "--probe-port", "29411", "--json", *args)
    pa = doctor(*common, env=job_env(hosts, 0, port, **(env_extra or {})), netns=hosts["a"])
    pb = doctor(*common, env=job_env(hosts, 1, port, **(env_extra or {})), netns=hosts["b"], wrap=wrap_b)
    return [finish(p) for p in (pa, pb)]


def test_all_nodes_meet_compare_and_test_every_pair(hosts):
    port = 29400
    for rc, out, err in all_nodes(hosts, port):
        c = checks(out)
        assert rc == 0, out + err
        assert c["nodes"]["status"] == "PASS" and "2 node(s) met" in c["nodes"]["detail"], out
        assert c["nodes-mesh"]["status"] == "PASS", out
        assert c["nodes-clock"]["status"] == "PASS", out
    # A firewall on host B that drops new connections to the probe port: host A cannot reach it.
    sh("ip", "netns", "exec", hosts["b"], "iptables", "-A", "INPUT", "-p", "tcp", "--syn", "--dport", "29411", "-j", "DROP")
    for rc, out, err in all_nodes(hosts, port):
        c = checks(out)
        assert rc == EXIT_FAIL, out + err
        assert c["nodes-mesh"]["status"] == "FAIL", out
        assert f"node 0 -> node 1 ({hosts['addr_b']}:29411): no answer within 1 s" in c["nodes-mesh"]["detail"], out
        assert "1 of 2 node pairs" in c["nodes-mesh"]["detail"], out


def test_an_output_dir_that_is_node_local_on_one_host(hosts, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    # Host B mounts its own (empty) disk over the folder: it does not see what host A writes.
    wrap = ("unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs lfdoctor "{shared}" && exec "$0" "$@"')
    results = all_nodes(hosts, 29400, "configs/tiny_cpu.yaml", f"output_dir={shared}", wrap_b=wrap)
    for rc, out, err in results:
        c = checks(out)
        assert rc == EXIT_FAIL, out + err
        assert c["output-shared"]["status"] == "FAIL", out
        assert "node 1 (" in c["output-shared"]["detail"] and "not one filesystem" in c["output-shared"]["detail"], out
    assert not list(shared.iterdir()), "node 0's marker file was left behind"
    # Without the private mount both see it.
    for rc, out, err in all_nodes(hosts, 29400, "configs/tiny_cpu.yaml", f"output_dir={shared}"):
        assert checks(out)["output-shared"]["status"] == "PASS", out


def test_a_multi_node_job_on_a_network_address_without_a_token_is_warned(hosts, tmp_path):
    """Issue 29: whoever reaches MASTER_PORT of a job without LF_JOB_TOKEN can try to join it;
    the doctor says so for a multi-node job on a non-loopback address, and passes with a token
    (from LF_JOB_TOKEN_FILE here). Loopback jobs are not warned."""
    job = {"NNODES": "2", "NODE_RANK": "0", "MASTER_ADDR": hosts["addr_a"], "MASTER_PORT": "29400"}
    rc, c, text = run_json(env=job, netns=hosts["a"])
    assert c["job-token"]["status"] == "WARN", text
    assert f"a 2-node job on MASTER_ADDR={hosts['addr_a']} (not a loopback address) without a job token" \
        in c["job-token"]["detail"], text
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    rc, c, text = run_json(env={**job, "LF_JOB_TOKEN_FILE": str(secret)}, netns=hosts["a"])
    assert c["job-token"]["status"] == "PASS" and "s3cret" not in text, text
    rc, c, text = run_json(env={"NNODES": "2", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                                "MASTER_PORT": str(free_port())})
    assert "job-token" not in c, text


def test_the_doctor_creates_no_output_dir(tmp_path):
    out = tmp_path / "a" / "b"
    rc, c, text = run_json("configs/tiny_cpu.yaml", f"output_dir={out}", env={"MASTER_PORT": str(free_port())})
    assert c["output-dir"]["status"] == "PASS" and "does not exist yet" in c["output-dir"]["detail"], text
    assert not (tmp_path / "a").exists(), "the doctor created output_dir"
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())
