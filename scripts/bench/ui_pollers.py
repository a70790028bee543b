#!/usr/bin/env python3
"""N open live pages, as browsers poll them (issue 35's cost benchmark): each "page" fetches
/api/state, then /api/logs?rank=0, every INTERVAL seconds (what src/ui/assets/app.js does), and
/api/preview once. Runs until SIGTERM / SIGINT or --seconds, then prints one JSON line:
{"pages", "interval_s", "seconds", "requests", "failures", "refreshes" (the pages' /api/state + /api/logs
rounds), "state_p50_ms", "state_p99_ms"}.

    scripts/bench/ui_pollers.py --url http://127.0.0.1:PORT/ [--pages 10] [--interval 1] [--seconds S]
                                [--save-gpu-state FILE]   # the last state that listed a GPU
"""
import argparse, json, signal, statistics, threading, time, urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pages", type=int, default=10)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--save-gpu-state", default="")
    a = ap.parse_args()
    base = a.url.split("?")[0].rstrip("/")
    token = a.url.split("token=")[1] if "token=" in a.url else ""
    sep = lambda p: p + (("&" if "?" in p else "?") + "token=" + token if token else "")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    lock = threading.Lock()
    counts = {"requests": 0, "failures": 0}
    state_ms = []

    def get(path):
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(base + sep(path), timeout=10) as r:
                body = r.read()
            ok = True
            if a.save_gpu_state and path == "/api/state":
                s = json.loads(body)
                if any(n["gpus"] for n in s["nodes"]):
                    with open(a.save_gpu_state, "wb") as f:
                        f.write(body)
        except (OSError, ValueError):
            ok = False
        with lock:
            counts["requests"] += 1
            counts["failures"] += not ok
        return (time.perf_counter() - t0) * 1000

    def page(i):
        get("/api/preview")
        # Pages opened at different moments: spread over the interval.
        nxt = time.monotonic() + a.interval * i / a.pages
        while not stop.is_set():
            stop.wait(max(0, nxt - time.monotonic()))
            if stop.is_set():
                break
            ms = get("/api/state")
            with lock:
                state_ms.append(ms)
            get("/api/logs?rank=0")
            nxt += a.interval

    t0 = time.monotonic()
    threads = [threading.Thread(target=page, args=(i,), daemon=True) for i in range(a.pages)]
    for t in threads:
        t.start()
    stop.wait(a.seconds)
    stop.set()
    for t in threads:
        t.join(15)
    q = sorted(state_ms)
    print(json.dumps({"pages": a.pages, "interval_s": a.interval, "seconds": round(time.monotonic() - t0, 1),
                      **counts, "refreshes": len(state_ms), "state_p50_ms": round(statistics.median(q), 2) if q else None,
                      "state_p99_ms": round(q[int(0.99 * (len(q) - 1))], 2) if q else None}), flush=True)


if __name__ == "__main__":
    main()
