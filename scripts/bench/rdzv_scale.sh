#!/usr/bin/env bash
# Rendezvous scale benchmark: N simulated agents (one connection each) join one
# `lf-train rdzv-server` on loopback; time until all have their layout, then
# heartbeat throughput, and the server's memory per connection.
# Usage: scripts/bench/rdzv_scale.sh [N ...]   (default 256 1024 4096)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BUILD_DIR:-build}
cmake --build "$BIN" --target lf-train lf-rdzv-load >/dev/null  # lf-rdzv-load is not in `all`
ulimit -n "$(ulimit -Hn)"
for n in "${@:-256 1024 4096}"; do
  for rep in 1 2 3; do
    port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    "$BIN/src/launcher/lf-train" rdzv-server --nnodes "$n" --port "$port" --heartbeat-timeout 60 \
      --join-timeout 60 >/dev/null 2>&1 &
    server=$!
    for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.02; done
    "$BIN/src/rendezvous/lf-rdzv-load" --port "$port" --agents "$n" --heartbeats 100 --server-pid "$server" || true
    kill -9 "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
  done
done
