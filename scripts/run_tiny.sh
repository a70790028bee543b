#!/usr/bin/env bash
# THE main-job command (README): installs what it needs, builds, and runs the
# embedded default job. Until the trainer lands this is a 2-worker launch of a
# real PyTorch gloo all_reduce program on this machine (CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --python
scripts/build.sh >/dev/null
PY=$PWD/.venv/bin/python
echo "== lf-train launch: 2 workers, torch.distributed gloo all_reduce =="
build/src/launcher/lf-train launch --nproc-per-node 2 --master-port "${MASTER_PORT:-29500}" \
  -- "$PY" tests/launcher/progs/gloo_allreduce.py
