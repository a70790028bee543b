#!/usr/bin/env bash
# THE main-job command (README): installs what it needs, builds, and trains the
# embedded default: configs/tiny_cpu.yaml (a tiny Qwen2-shaped model initialised
# from its config.json, the shipped alpaca/identity demo data, a small tokenizer
# of the project's own) on this machine's CPU, through the same path a GPU
# cluster uses: lf-train -> rendezvous -> agent -> lf-worker -> trainer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --python
scripts/build.sh >/dev/null
build/src/launcher/lf-train configs/tiny_cpu.yaml --master-port "${MASTER_PORT:-0}" "$@"
echo
echo "outputs: saves/tiny-cpu/full/sft/ (trainer_log.jsonl, training_loss.png, training_eval_loss.png,"
echo "         model.safetensors + config.json + tokenizer, all_results.json, trainer_state.json)"
