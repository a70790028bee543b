"""The agent's Prometheus endpoint as a scraper sees it: a real `lf-train launch` with
--metrics-port 0 (the port it prints), `promtool check metrics` on what it serves, 1,000
scrapes/s for 10 s all answered (asserted: only that), and the errors of a bad port."""
import json, os, re, shutil, socket, subprocess, time, urllib.parse, urllib.request

import pytest

from harness import Agent, PY, free_port, wait_until

HERE = os.path.dirname(__file__)
PROGRESS = os.path.join(HERE, "progs", "progress_worker.py")
SCRAPE_LOAD = os.environ.get("LF_SCRAPE_LOAD_BIN", "")
METRICS_TEST = os.environ.get("LF_METRICS_TEST_BIN", "")
EXIT_CONFIG, EXIT_NETWORK = 2, 11


def promtool():
    tool = shutil.which("promtool")
    if not tool:
        pytest.fail("promtool not found: scripts/install_deps.sh installs Debian's prometheus package")
    return tool


def metrics_url(agent, timeout=20):
    """The URL the agent printed ("metrics: serving Prometheus metrics on http://H:P/metrics")."""
    found = {}

    def printed():
        m = re.search(r"serving Prometheus metrics on (http://[0-9.]+:(\d+)/metrics)", agent.err)
        if m:
            found["url"] = m.group(1)
        return "url" in found or agent.poll() is not None

    assert wait_until(printed, timeout), agent.err
    assert "url" in found, agent.err
    return found["url"]


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def sample(text, name, **labels):
    """The value of the first sample of `name` whose labels include `labels`."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture
def agent(tmp_path):
    a = Agent(["launch", "--nproc-per-node", "2", "--master-port", "0", "--metrics-port", "0", "--",
               PY, PROGRESS, "--steps", "20", "--sleep", "60"],
              env={"LF_METRICS_ADDR": "127.0.0.1", "NCCL_SOCKET_IFNAME": "lo"}, tmp=str(tmp_path))
    yield a
    a.cleanup()


def test_exposition_passes_promtool_and_has_the_agent_series(agent):
    url = metrics_url(agent)
    assert wait_until(lambda: sample(scrape(url), "lf_agent_worker_up", rank="1") == 1, 20), scrape(url)
    text = scrape(url)
    check = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr + text
    for name in ("lf_agent_info", "lf_agent_generation", "lf_agent_restarts_total", "lf_agent_gpu_metrics_available",
                 "lf_agent_master_heartbeat_age_seconds", "lf_net_receive_bytes_total"):
        assert f"\n{name}{{" in text, name + "\n" + text
    assert sample(text, "lf_agent_worker_up", rank="0") == 1
    assert sample(text, "lf_net_transmit_bytes_total", interface="lo") > 0
    # No NVIDIA driver here: no GPU series, and the one line that says why.
    assert not re.search(r"^lf_gpu_", text, re.M), text
    assert sample(text, "lf_agent_gpu_metrics_available") == 0
    assert agent.err.count("metrics: no GPU series on this node") == 1, agent.err


def exporter_expositions(tmp_path):
    """The node exporter's page with every per-rank, histogram, network and InfiniBand family, and
    every lf_gpu_* family on two GPUs, as the exporter's own test binary writes them."""
    if not METRICS_TEST:
        pytest.skip("LF_METRICS_TEST_BIN not set (run through ctest)")
    node, gpu = tmp_path / "exposition.txt", tmp_path / "gpu_exposition.txt"
    run = subprocess.run([METRICS_TEST, "--gtest_filter=NodeExporter.*:GpuSeries.EveryFieldOnTwoGpus"],
                         env=dict(os.environ, LF_EXPOSITION_DUMP=str(node), LF_GPU_EXPOSITION_DUMP=str(gpu)),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    return node.read_text(), gpu.read_text()


def test_every_series_the_exporter_writes_passes_promtool(tmp_path):
    node, gpu = exporter_expositions(tmp_path)
    assert "lf_train_step_seconds_bucket" in node and "lf_ib_port_receive_bytes_total" in node, node
    assert "lf_gpu_nvlink_transmit_bytes_total" in gpu, gpu
    for text in (node, gpu):
        check = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr + text


DOCS = os.path.join(HERE, "..", "..", "docs")


def test_docs_prometheus_config_and_alert_rules_pass_promtool():
    for kind, path in (("config", "prometheus/prometheus.yml"), ("rules", "prometheus/lf-train-alerts.yml")):
        check = subprocess.run([promtool(), "check", kind, os.path.join(DOCS, path)], capture_output=True, text=True)
        assert check.returncode == 0, (path, check.stdout + check.stderr)


def test_every_series_the_dashboard_and_alerts_query_is_one_lf_train_writes(tmp_path):
    """A renamed series would leave a Grafana panel empty without an error: every lf_* name in
    docs/grafana and docs/prometheus must be a family of the exposition (or its _bucket/_count)."""
    written = set()
    for text in exporter_expositions(tmp_path):
        for line in text.splitlines():
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                written.add(m.group(1))
                if m.group(2) == "histogram":
                    written.update(m.group(1) + s for s in ("_bucket", "_count", "_sum"))
    dashboard = json.load(open(os.path.join(DOCS, "grafana", "lf-train-dashboard.json")))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t]
    assert len(exprs) >= 20, exprs
    exprs.append(open(os.path.join(DOCS, "prometheus", "lf-train-alerts.yml")).read())
    queried = {name for e in exprs for name in re.findall(r"\b(lf_[a-z_]+)\b", e)}
    assert {"lf_train_loss", "lf_gpu_utilization_ratio", "lf_train_step_seconds_bucket"} <= queried, queried
    assert queried - written == set(), sorted(queried - written)


def test_a_thousand_scrapes_per_second_are_all_answered(agent):
    if not SCRAPE_LOAD:
        pytest.skip("LF_SCRAPE_LOAD_BIN not set (run through ctest)")
    url = metrics_url(agent)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    run = subprocess.run([SCRAPE_LOAD, "--port", str(port), "--rate", "1000", "--seconds", "10", "--connections", "8"],
                         capture_output=True, text=True, timeout=60)
    result = json.loads(run.stdout)
    print(result)  # the achieved rate and latencies are a benchmark (docs/BENCHMARKS.md), not asserted
    assert result["sent"] > 0
    assert result["answered"] == result["sent"] and result["errors"] == 0, result
    assert agent.poll() is None, agent.err  # the agent is still running its job


def test_metrics_port_in_use_is_a_network_error_naming_it(tmp_path):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        a = Agent(["launch", "--master-port", "0", "--metrics-port", str(port), "--", PY, "-c", "pass"], tmp=str(tmp_path))
        try:
            assert a.wait(30) == EXIT_NETWORK, a.err
            # The endpoint binds loopback unless asked (--metrics-addr / LF_METRICS_ADDR).
            assert f"metrics endpoint cannot listen on 127.0.0.1:{port}" in a.err, a.err
            assert "pick another --metrics-port" in a.err, a.err
        finally:
            a.cleanup()


@pytest.mark.parametrize("env,flag,expected", [
    ({"LF_METRICS_PORT": "http"}, [], "environment variable LF_METRICS_PORT='http': expected"),
    ({}, ["--metrics-port", "70000"], "is not a TCP port"),
    ({"LF_METRICS_ADDR": "localhost:9"}, ["--metrics-port", "0"], "LF_METRICS_ADDR 'localhost:9' is not an IP address"),
    ({"LF_HEALTH_GPU_TEMP_C": "warm"}, ["--metrics-port", "0"], "environment variable LF_HEALTH_GPU_TEMP_C='warm': expected"),
])
def test_bad_metrics_settings_are_config_errors(tmp_path, env, flag, expected):
    a = Agent(["launch", "--master-port", "0", *flag, "--", PY, "-c", "pass"], env=env, tmp=str(tmp_path))
    try:
        assert a.wait(30) == EXIT_CONFIG, a.err
        assert expected in a.err, a.err
    finally:
        a.cleanup()


def test_progress_beats_become_training_series(agent):
    """Per-rank lf_train_* series from the workers' progress beats (lf/agent/worker_watch.h)."""
    url = metrics_url(agent)
    # Both ranks' last beat (waiting on rank 1 alone once read rank 0 a step behind: 5.1, its step-19 loss).
    assert wait_until(lambda: all(sample(scrape(url), "lf_train_step", rank=r) == 20 for r in "01"), 30), scrape(url)
    text = scrape(url)
    # The job's loss once, rank 0's (every rank of a real job logs the same); per-rank step times.
    assert sample(text, "lf_train_loss", rank="0") == pytest.approx(7.0 - 2.0, rel=1e-12)
    assert sample(text, "lf_train_loss", rank="1") is None, text
    # Each step after the first one seen, once (the agent samples every 250 ms: skipped steps
    # count with the latest step time).
    assert 10 <= sample(text, "lf_train_step_seconds_count", rank="0") <= 20, text
    assert sample(text, "lf_train_comm_exposed_seconds", rank="0") == 0.001
    check = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


# ---- a real Prometheus scraping two nodes ------------------------------------------------------

def prometheus_query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        reply = json.load(r)
    assert reply["status"] == "success", reply
    return reply["data"]["result"]


@pytest.fixture
def prometheus(tmp_path):
    """Debian's prometheus on loopback, scraping two agent ports every 250 ms."""
    exe = shutil.which("prometheus")
    if not exe:
        pytest.fail("prometheus not found: scripts/install_deps.sh installs Debian's prometheus package")
    targets, port = [free_port(), free_port()], free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\nscrape_configs:\n"
                   "  - job_name: lf-train\n    static_configs:\n      - targets: [" +
                   ", ".join(f"'127.0.0.1:{t}'" for t in targets) + "]\n")
    log_path = tmp_path / "prometheus.log"
    proc = subprocess.Popen([exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)

    def ready():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return proc.poll() is not None

    try:
        assert wait_until(ready, 60) and proc.poll() is None, log_path.read_text()
        yield port, targets
    finally:
        proc.terminate()
        proc.wait(10)


def test_prometheus_scrapes_both_nodes_of_a_job(prometheus, tmp_path):
    """Two agents (2 loopback nodes, one worker each, sending lf-worker's progress beats) scraped
    by a real Prometheus: its HTTP API shows lf_train_step rising to the last step on both ranks,
    lf_train_loss equal to the last loss each rank sent, and every per-rank and per-node series
    from both nodes. (tests/train/test_observe.py does the same with real training.)"""
    prom, targets = prometheus
    # Prometheus starts scraping a target some seconds after it is ready (its discovery
    # updates are batched): wait until both targets were tried (up 0: nothing listens yet).
    assert wait_until(lambda: len(prometheus_query(prom, "up")) == 2, 60), prometheus_query(prom, "up")
    master = free_port()
    steps = 30
    agents = [Agent(["launch", "--nnodes", "2", "--node-rank", str(r), "--master-port", str(master),
                     "--metrics-port", str(targets[r]), "--", PY, PROGRESS, "--steps", str(steps), "--interval", "0.1"],
                    env={"LF_METRICS_ADDR": "127.0.0.1", "LF_METRICS_LINGER_S": "2", "NCCL_SOCKET_IFNAME": "lo"},
                    tmp=str(tmp_path)) for r in (0, 1)]
    try:
        for a in agents:
            assert a.wait(60) == 0, a.err
    finally:
        for a in agents:
            a.cleanup()
    for rank in (0, 1):
        series = prometheus_query(prom, f'lf_train_step{{rank="{rank}"}}[10m]')
        assert len(series) == 1, (series, agents[rank].err[-3000:])
        values = [float(v) for _, v in series[0]["values"]]
        assert values == sorted(values) and values[0] < values[-1] == steps, values
    last = prometheus_query(prom, 'last_over_time(lf_train_loss[10m])')
    assert len(last) == 1 and last[0]["metric"]["rank"] == "0", last  # the job's, once
    assert float(last[0]["value"][1]) == 7.0 - 0.1 * steps, last
    for name in ("lf_train_loss", "lf_train_learning_rate", "lf_train_grad_norm", "lf_train_eval_loss"):
        nodes = {s["metric"]["node"] for s in prometheus_query(prom, f"last_over_time({name}[10m])")}
        assert nodes == {"0"}, (name, nodes)
    for name in ("lf_train_step", "lf_train_tokens_per_second", "lf_train_step_seconds_bucket",
                 "lf_train_comm_exposed_seconds", "lf_train_last_step_timestamp_seconds", "lf_train_checkpoint_seconds",
                 "lf_agent_restarts_total", "lf_agent_generation", "lf_agent_worker_up",
                 "lf_agent_master_heartbeat_age_seconds", "lf_net_transmit_bytes_total",
                 "lf_worker_heartbeat_age_seconds"):
        nodes = {s["metric"]["node"] for s in prometheus_query(prom, f"last_over_time({name}[10m])")}
        assert nodes == {"0", "1"}, (name, nodes)
    up = prometheus_query(prom, "max_over_time(up[10m])")
    assert sorted(s["metric"]["instance"] for s in up) == sorted(f"127.0.0.1:{t}" for t in targets), up
    assert all(float(s["value"][1]) == 1 for s in up), up  # each agent was scraped
