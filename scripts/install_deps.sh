#!/usr/bin/env bash
# Installs what building and testing lf-train needs on Debian 12: the C++
# libraries (Debian packages) and, with --python, the Python venv used by the
# torch build and the reference-fixture scripts. Idempotent and quick when done.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential ninja-build pkg-config
  libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev libboost-dev
  libgtest-dev libgmock-dev
  libpcre2-dev libicu-dev nlohmann-json3-dev libcairo2-dev
  clang-14 libclang-rt-14-dev iproute2 procps
  # report_to: tensorboard (protobuf-lite Event messages); the metrics tests' real Prometheus
  # and promtool; doctor's namespace tests block ports with iptables.
  libprotobuf-dev protobuf-compiler prometheus iptables
  openssh-client openssh-server  # --hostfile: ssh, and the sshd of its network-namespace test
  shellcheck                     # docs/cluster/slurm.sbatch (tests/launcher/test_recipes.py)
  chromium                       # the live page in a real browser (tests/ui/test_page_browser.py, headless)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cmake >/dev/null || pip install -q cmake

if [[ "${1:-}" == "--python" ]]; then
  if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
  fi
  # torch==2.13.0 is the CPU wheel; the rest are the reference implementations
  # the numerics tests compare against, and pyarrow, whose Arrow/Parquet C++ headers and
  # libraries the build uses for Parquet datasets (Debian 12 packages no libarrow/libparquet).
  if ! .venv/bin/python -c 'import torch, transformers, peft, tokenizers, safetensors' 2>/dev/null ||
     ! cmp -s scripts/requirements-dev.txt .venv/.requirements-installed; then
    .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements-dev.txt
    cp scripts/requirements-dev.txt .venv/.requirements-installed
  fi
fi
