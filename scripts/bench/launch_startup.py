"""Launch-to-exit of 2 workers: `lf-train launch --nproc-per-node 2 -- true` vs
`torchrun --nproc_per_node 2 empty.py`, measured back to back on the same machine.
Prints a table and one RESULT json line. Usage: python3 scripts/bench/launch_startup.py [--reps 10]"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
    return dt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--lf-train", default=os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"), "src/launcher/lf-train"))
    p.add_argument("--torchrun", default=os.path.join(os.path.dirname(sys.executable), "torchrun"))
    a = p.parse_args()
    empty = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    empty.write("pass\n")
    empty.close()
    lf, tr = [], []
    for _ in range(a.reps):  # interleaved, so drift hits both alike
        lf.append(timed([a.lf_train, "launch", "--nproc-per-node", "2", "--master-port", str(free_port()), "--", "true"]))
        tr.append(timed([a.torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()), empty.name]))
    res = {"reps": a.reps, "lf_train_median_s": statistics.median(lf), "lf_train_min_s": min(lf),
           "torchrun_median_s": statistics.median(tr), "torchrun_min_s": min(tr),
           "speedup": statistics.median(tr) / statistics.median(lf)}
    print(f"lf-train launch (2 x true):      median {res['lf_train_median_s']*1000:8.1f} ms  min {res['lf_train_min_s']*1000:8.1f} ms")
    print(f"torchrun (2 x empty python):     median {res['torchrun_median_s']*1000:8.1f} ms  min {res['torchrun_min_s']*1000:8.1f} ms")
    print(f"ratio torchrun / lf-train:       {res['speedup']:.1f}x")
    print("RESULT " + json.dumps(res))


if __name__ == "__main__":
    main()
