"""`lf-train launch --hostfile FILE -- CMD` and `lf-train CONFIG --hostfile FILE` (issue 17): one
command starts the agent of every host over the system ssh. Two hosts are two network namespaces
joined by a veth pair, each with a real sshd (Debian's openssh-server) that accepts only a key this
test makes. Checked: every host's output comes back prefixed, the hosts get NODE_RANK by their line
and MASTER_ADDR = the first host, NCCL_*/LF_*/--env variables are forwarded, and Ctrl-C or one
host's failure stops the agents on every host (none left behind)."""
import json, os, re, shutil, signal, subprocess, time

import pytest

from harness import LF_TRAIN, PY, WORKER, live_processes, unique_marker, wait_until
from netns_pair import sh, two_hosts

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def hosts(tmp_path):
    if not os.path.exists(SSHD) or not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip("needs openssh-server and openssh-client (scripts/install_deps.sh installs them)")
    with two_hosts("lfs", 214) as net:
        yield from _with_sshd(tmp_path, net["a"], net["b"], {net["a"]: net["addr_a"], net["b"]: net["addr_b"]})


def _with_sshd(tmp_path, a, b, addrs):
    """A real sshd in each namespace that accepts only a key made here; the hosts fixture's value."""
    d = tmp_path / "ssh"
    d.mkdir()
    os.chmod(d, 0o700)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "user_key"))
    shutil.copy(d / "user_key.pub", d / "authorized_keys")
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text("".join(f"{ip} {host_pub[0]} {host_pub[1]}\n" for ip in addrs.values()))
    (d / "ssh_config").write_text(
        f"Host *\n  User root\n  IdentityFile {d}/user_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n"
        "  StrictHostKeyChecking yes\n  ConnectTimeout 10\n")
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation folder
    sshds = []
    for ns, ip in addrs.items():
        (d / f"sshd_{ns}").write_text(
            f"ListenAddress {ip}\nPort 22\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            f"UsePAM no\nStrictModes no\nPidFile {d}/sshd_{ns}.pid\nLogLevel ERROR\n")
        sshds.append(subprocess.Popen(["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", str(d / f"sshd_{ns}")],
                                      stdout=subprocess.DEVNULL, stderr=open(d / f"sshd_{ns}.log", "w")))
    env = dict(os.environ, LF_SSH_ARGS=f"-F {d}/ssh_config")
    env.pop("NNODES", None)
    env.pop("NODE_RANK", None)
    ok = lambda ip: subprocess.run(["ip", "netns", "exec", a, "ssh", "-F", f"{d}/ssh_config", "-o", "BatchMode=yes",
                                    ip, "true"], capture_output=True).returncode == 0
    try:
        assert wait_until(lambda: all(ok(ip) for ip in addrs.values()), 20, interval=0.3), \
            "sshd in the namespaces does not accept the test's key: " + \
            "".join((d / f"sshd_{ns}.log").read_text() for ns in addrs)
        yield dict(a=a, b=b, addr_a=addrs[a], addr_b=addrs[b], env=env, tmp=tmp_path)
    finally:
        for p in sshds:
            p.terminate()
            p.wait(10)


def workers(marker):
    """The test workers (python) of every host: both namespaces share this /proc."""
    return [pid for pid, cmd, argv0 in live_processes() if marker in cmd and argv0 == PY and WORKER in cmd]


def anything_with(marker):
    """Every process that still carries the marker: ssh clients, remote shells, agents, workers."""
    return [(pid, cmd[:120]) for pid, cmd, argv0 in live_processes() if marker in cmd and "pytest" not in cmd]


def hostfile(hosts, slots=2):
    f = hosts["tmp"] / "hostfile"
    f.write_text(f"# the job's hosts\n{hosts['addr_a']} slots={slots}\n\n{hosts['addr_b']} slots={slots}  # second\n")
    return str(f)


def start(hosts, args, **kw):
    """lf-train in host A's namespace (where a user would type it), output captured."""
    return subprocess.Popen(["ip", "netns", "exec", hosts["a"], LF_TRAIN, *args], cwd=ROOT, env=hosts["env"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def envs(text, host):
    found = {}
    for line in text.splitlines():
        m = re.match(rf"\[{re.escape(host)}\] \[rank (\d+)\] ENV (.*)$", line)
        if m:
            found[int(m.group(1))] = json.loads(m.group(2))
    return found


def test_one_command_runs_the_job_on_every_host_with_prefixed_output(hosts):
    env = dict(hosts["env"], NCCL_DEBUG="WARN", NOT_FORWARDED="x")
    hosts["env"] = env
    p = start(hosts, ["launch", "--hostfile", hostfile(hosts), "--master-port", "29411", "--env",
                      "OMP_NUM_THREADS=3", "--", PY, WORKER])
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, out[-3000:] + err[-3000:]
    on_a, on_b = envs(out, hosts["addr_a"]), envs(out, hosts["addr_b"])
    assert sorted(on_a) == [0, 1] and sorted(on_b) == [2, 3], out[-3000:]
    every = {**on_a, **on_b}
    assert {e["MASTER_ADDR"] for e in every.values()} == {hosts["addr_a"]}
    assert {e["LF_RDZV_ADDR"] for e in every.values()} == {hosts["addr_a"]}
    assert {e["NCCL_DEBUG"] for e in every.values()} == {"WARN"}
    assert {e["OMP_NUM_THREADS"] for e in every.values()} == {"3"}
    assert {e["GROUP_RANK"] for e in on_b.values()} == {"1"}


def test_the_hostfile_job_gets_a_token_of_its_own_that_no_command_line_shows(hosts):
    """Issue 29: without LF_JOB_TOKEN the command makes one; every host's workers get the same
    one, and it travels on ssh's stdin, never in a command line (`ps` on a host would show it)."""
    env = {k: v for k, v in hosts["env"].items() if k not in ("LF_JOB_TOKEN", "LF_JOB_TOKEN_FILE")}
    hosts["env"] = env
    marker = unique_marker("sshtoken")
    p = start(hosts, ["launch", "--hostfile", hostfile(hosts, 1), "--master-port", "29416", "--", PY, WORKER,
                      "--marker", marker, "--sleep", "3"])
    try:
        assert wait_until(lambda: len(workers(marker)) == 2, 30), anything_with(marker)
        lines = [cmd for _, cmd, _ in live_processes() if marker in cmd]
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out[-2000:] + err[-2000:]
    assert "made a job token for this run" in err, err[-2000:]
    tokens = {e.get("LF_JOB_TOKEN") for e in {**envs(out, hosts["addr_a"]), **envs(out, hosts["addr_b"])}.values()}
    assert len(tokens) == 1 and len(next(iter(tokens)) or "") == 32, tokens
    token = next(iter(tokens))
    assert not [cmd for cmd in lines if token in cmd], lines


def test_ctrl_c_stops_the_agents_on_every_host(hosts):
    marker = unique_marker("sshstop")
    p = start(hosts, ["launch", "--hostfile", hostfile(hosts, 1), "--master-port", "29412", "--", PY, WORKER,
                      "--marker", marker, "--sleep", "300"])
    try:
        assert wait_until(lambda: len(workers(marker)) == 2, 30), anything_with(marker)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, out[-2000:] + err[-2000:]
    assert "stopping the agents on every host" in err, err[-2000:]
    assert wait_until(lambda: not anything_with(marker), 20), anything_with(marker)


def test_one_failing_host_stops_every_host_with_its_exit_code(hosts):
    marker = unique_marker("sshfail")
    # Rank 2 (host B) exits 3 after a second; host A's workers would sleep on.
    p = start(hosts, ["launch", "--hostfile", hostfile(hosts), "--master-port", "29413", "--", PY, WORKER,
                      "--marker", marker, "--sleep", "300", "--fail-rank", "2", "--fail-after", "1"])
    out, err = p.communicate(timeout=90)
    # Host B's agent says a worker failed (14), host A's that another node did (13): whichever
    # ssh ends first is the failure named; the other host is stopped either way.
    assert p.returncode in (13, 14), out[-2000:] + err[-2000:]
    assert re.search(r"--hostfile: \S+ ended with exit 1[34]", err), err[-3000:]
    assert "exited with code 3" in err, err[-3000:]
    assert wait_until(lambda: not anything_with(marker), 20), anything_with(marker)


def test_a_host_ssh_cannot_reach_fails_with_the_network_code_and_says_what_to_check(hosts):
    f = hosts["tmp"] / "bad_hostfile"
    f.write_text(f"{hosts['addr_a']} slots=1\n10.215.0.9 slots=1\n")  # nobody there
    env = dict(hosts["env"], LF_SSH_ARGS=hosts["env"]["LF_SSH_ARGS"] + " -o ConnectTimeout=2")
    hosts["env"] = env
    p = start(hosts, ["launch", "--hostfile", str(f), "--master-port", "29414", "--join-timeout", "30", "--", PY,
                      WORKER, "--sleep", "300"])
    out, err = p.communicate(timeout=90)
    assert p.returncode == 11, out[-2000:] + err[-2000:]
    assert "ssh -o BatchMode=yes 10.215.0.9 true" in err, err[-2000:]


@pytest.mark.parametrize("text,expected", [("h1 slots=two\n", "slots=two must be a whole number"),
                                           ("h1 slots=2\nh1 slots=2\n", "listed twice"),
                                           ("h1 gpus=2\n", "'gpus=2' is not understood"),
                                           ("# nothing\n\n", "names no host"),
                                           ("h1 slots=2\nh2 slots=4\n", "same number of workers")])
def test_a_bad_hostfile_exits_2_naming_the_line(tmp_path, text, expected):
    f = tmp_path / "hosts"
    f.write_text(text)
    r = subprocess.run([LF_TRAIN, "launch", "--hostfile", str(f), "--", "true"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert expected in r.stderr, r.stderr


def test_training_over_the_hostfile(hosts):
    """The train form: the same `lf-train CONFIG` on both hosts, the output_dir shared (one filesystem)."""
    if not os.environ.get("LF_WORKER_BIN") and not os.path.exists(
            os.path.join(os.path.dirname(LF_TRAIN), "..", "worker", "lf-worker")):
        pytest.skip("needs lf-worker (a build with LF_WITH_TORCH=ON)")
    out_dir = hosts["tmp"] / "out"
    p = start(hosts, ["configs/tiny_cpu.yaml", f"output_dir={out_dir}", "max_steps=3", "eval_strategy=no",
                      "val_size=0", "plot_loss=false", "save_strategy=no", "per_device_train_batch_size=2",
                      "--hostfile", hostfile(hosts, 1), "--master-port", "29415", "--env", "OMP_NUM_THREADS=1",
                      # a worker found through LD_LIBRARY_PATH here needs it there too: --env forwards it
                      *(["--env", "LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else [])])
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, out[-3000:] + err[-3000:]
    assert os.path.exists(out_dir / "model.safetensors")
    assert f"[{hosts['addr_b']}]" in out + err
