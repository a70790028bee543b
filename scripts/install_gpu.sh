#!/usr/bin/env bash
# Installs lf-train on a GPU node without Docker: build dependencies, the CUDA torch wheel whose
# libtorch and NCCL lf-worker links, a build for this node's GPUs, and `lf-train` + `lf-worker`
# (+ `lf-train-local`) in PREFIX/bin.
#
#   scripts/install_gpu.sh [--prefix DIR] [--arch LIST] [--jobs N]          # online (apt + PyPI)
#   scripts/install_gpu.sh --offline --python PY [--prefix DIR] ...         # no network
#
# Online: Debian/Ubuntu packages through apt (sudo when not root), a venv in PREFIX/venv with
# torch==$LF_TORCH_VERSION from PyPI (its Linux wheel is a CUDA build, NCCL included; another
# index with LF_TORCH_INDEX=https://download.pytorch.org/whl/cu128). `--dry-run` prints what
# pip would install and stops.
# Offline: nothing is installed from a registry. PY must import a CUDA torch (an image's, a
# wheel copied in); the C++ libraries must be installed, or unpacked .debs under $LF_DEPS
# (scripts/device/fetch_debs.sh downloads them on a machine with network; this script then
# unpacks .deps/debs there when LF_DEPS has none yet).
# The GPUs' architecture comes from nvidia-smi (compute capability 9.0 -> 9.0a, Hopper's wgmma);
# --arch "8.0;9.0a" builds for a list (no GPU on the build host, or several kinds).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=$HOME/.local/lf-train OFFLINE=0 PY="" ARCH="" JOBS=$(nproc) DRY=0
while (($#)); do
  case "$1" in
    --prefix) PREFIX=$2; shift ;;
    --offline) OFFLINE=1 ;;
    --python) PY=$2; shift ;;
    --arch) ARCH=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --dry-run) DRY=1 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "install_gpu: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
TORCH=${LF_TORCH_VERSION:-2.13.0}
t0=$(date +%s)
say() { echo "install_gpu: $*"; }

APT=(build-essential ninja-build cmake pkg-config python3-venv libyaml-cpp-dev libspdlog-dev libfmt-dev
     libcli11-dev libboost-dev libpcre2-dev libicu-dev nlohmann-json3-dev libcairo2-dev libprotobuf-dev
     protobuf-compiler libgtest-dev libgmock-dev)

install_packages() {
  local missing=()
  for p in "${APT[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  local sudo=""; [[ $(id -u) == 0 ]] || sudo=sudo
  say "apt-get install ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

online_python() {
  local pip_args=(torch=="$TORCH")
  [[ -n ${LF_TORCH_INDEX:-} ]] && pip_args+=(--index-url "$LF_TORCH_INDEX")
  if ((DRY)); then  # what a clean node's pip resolves (--isolated: no pip config or PIP_* variables)
    local report; report=$(mktemp)
    python3 -m pip --isolated install --dry-run --ignore-installed --quiet --report "$report" "${pip_args[@]}"
    python3 -c 'import json, sys
for i in json.load(open(sys.argv[1]))["install"]:
    print("  would install", i["metadata"]["name"], i["metadata"]["version"], i["download_info"]["url"].rsplit("/", 1)[-1])' "$report"
    rm -f "$report"
    exit 0
  fi
  [[ -x $PREFIX/venv/bin/python ]] || python3 -m venv "$PREFIX/venv"
  "$PREFIX/venv/bin/pip" install -q --disable-pip-version-check "${pip_args[@]}"
  PY=$PREFIX/venv/bin/python
}

# LF_DEPS: unpacked .debs (an offline node): the paths the build and the binaries need.
use_unpacked_debs() {
  [[ -n ${LF_DEPS:-} ]] || return 0
  if [[ ! -f $LF_DEPS/.unpacked ]]; then
    ls .deps/debs/*.deb >/dev/null 2>&1 || { say "LF_DEPS=$LF_DEPS is empty and .deps/debs has no .debs"; exit 2; }
    mkdir -p "$LF_DEPS"
    for d in .deps/debs/*.deb; do dpkg -x "$d" "$LF_DEPS"; done
    touch "$LF_DEPS/.unpacked"
  fi
  . scripts/device/env.sh
  EXTRA=("-DCMAKE_CXX_FLAGS=-I$LF_DEPS/usr/include"
         "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$LF_DEPS/usr/lib/x86_64-linux-gnu:$LF_DEPS/lib/x86_64-linux-gnu")
  CMAKE_PATHS+=";$LF_DEPS/usr;$LF_DEPS/usr/lib/x86_64-linux-gnu/cmake"
  [[ -x $LF_DEPS/usr/bin/protoc ]] && EXTRA+=("-DProtobuf_PROTOC_EXECUTABLE=$LF_DEPS/usr/bin/protoc")
}

gpu_arch() {
  [[ -n $ARCH ]] && { echo "$ARCH"; return; }
  local caps
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u | tr '\n' ' ') || true
  [[ -n $caps ]] || { say "no GPU visible (nvidia-smi): pass --arch, e.g. --arch 9.0a" >&2; exit 2; }
  local list=""
  for c in $caps; do [[ $c == 9.0 ]] && c=9.0a; list+="${list:+;}$c"; done
  echo "$list"
}

if ((OFFLINE)); then
  [[ -n $PY ]] || { say "--offline needs --python PY (a python whose torch is a CUDA build)"; exit 2; }
else
  ((DRY)) || install_packages
  online_python
fi
"$PY" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' ||
  { say "$PY's torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) is not a CUDA build"; exit 2; }
CMAKE_PATHS=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
EXTRA=()
use_unpacked_debs
[[ -d /usr/local/cuda/bin ]] && export PATH=/usr/local/cuda/bin:$PATH
ARCHS=$(gpu_arch)
BUILD=${BUILD_DIR:-build-gpu}
say "torch $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)'), arch $ARCHS, prefix $PREFIX"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLF_WITH_TORCH=ON -DLF_WITH_CUDA=ON \
  "-DTORCH_CUDA_ARCH_LIST=$ARCHS" "-DCMAKE_PREFIX_PATH=$CMAKE_PATHS" "-DLF_PYTHON=$PY" \
  "-DCMAKE_INSTALL_PREFIX=$PREFIX" "${EXTRA[@]}" >"$BUILD.configure.log" 2>&1 ||
  { tail -30 "$BUILD.configure.log"; exit 1; }
ninja -C "$BUILD" -j "$JOBS" lf-train lf-worker lf-train-local
cmake --install "$BUILD" >/dev/null
say "installed $PREFIX/bin/lf-train, lf-worker, lf-train-local in $(( $(date +%s) - t0 )) s"
"$PREFIX/bin/lf-train" --version
