"""Process-level harness for lf-train integration tests: real binaries, real sockets, real signals."""
import json, os, random, re, signal, socket, subprocess, sys, tempfile, time

LF_TRAIN = os.environ.get("LF_TRAIN_BIN") or os.path.join(os.path.dirname(__file__), "../../build/src/launcher/lf-train")
WORKER = os.path.join(os.path.dirname(__file__), "progs", "worker.py")
PY = sys.executable


def free_port():
    """A TCP port free now, for a process to bind later (a rendezvous server, a metrics endpoint).
    Not one from bind(0): those come from the kernel's ephemeral range, and until the process
    binds it, any connection on the box (a busy CI runs many tests at once) may take the port as
    its local one; the bind then fails or, worse, a node dialling it early connects to itself.
    Below that range only explicit binds compete."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    while low > 11000:
        port = random.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:  # an unusual range that starts low: the kernel's pick
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agent:
    """One `lf-train launch` process with its output captured to files."""

    def __init__(self, args, env=None, netns=None, tmp=None):
        self.tmp = tmp or tempfile.mkdtemp(prefix="lf-agent-")
        self.out_path = os.path.join(self.tmp, f"out-{id(self)}.txt")
        self.err_path = os.path.join(self.tmp, f"err-{id(self)}.txt")
        full_env = dict(os.environ)
        full_env.pop("NNODES", None)
        full_env.update(env or {})
        cmd = [LF_TRAIN] + args
        if netns:
            cmd = ["ip", "netns", "exec", netns] + cmd
        self.proc = subprocess.Popen(cmd, stdout=open(self.out_path, "w"), stderr=open(self.err_path, "w"),
                                     env=full_env, start_new_session=True)

    def wait(self, timeout):
        return self.proc.wait(timeout=timeout)

    def poll(self):
        return self.proc.poll()

    @property
    def out(self):
        return open(self.out_path).read()

    @property
    def err(self):
        return open(self.err_path).read()

    def envs(self):
        """rank -> the ENV dict each worker printed."""
        found = {}
        for line in self.out.splitlines():
            m = re.match(r"\[rank (\d+)\] ENV (.*)$", line)
            if m:
                found[int(m.group(1))] = json.loads(m.group(2))
        return found

    def kill(self, sig=signal.SIGKILL):
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def cleanup(self):
        if self.proc.poll() is None:
            self.kill(signal.SIGCONT)
            self.kill(signal.SIGKILL)
            self.proc.wait(5)


def live_processes():
    """(pid, command line, argv[0]) of every non-zombie process."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            state = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state != "Z":
            yield int(d), cmd, cmd.split(" ", 1)[0]


def live_pids_with(marker):
    """PIDs of non-zombie processes whose command line contains marker."""
    pids = []
    for pid, cmd, argv0 in live_processes():
        # Agents carry the marker in their own argv (the worker command): count only workers and their children.
        if marker in cmd and "pytest" not in cmd and not argv0.endswith("lf-train") \
                and not (argv0 == "ip" and "netns" in cmd):
            pids.append(pid)
    return pids


def wait_until(pred, timeout, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def wait_no_survivors(marker, timeout=10):
    return wait_until(lambda: not live_pids_with(marker), timeout)


def unique_marker(name):
    return f"lfmark-{name}-{os.getpid()}-{time.time_ns()}"


def events(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]
