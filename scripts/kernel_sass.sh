#!/usr/bin/env bash
# A kernel's SASS for sm_90a and its register count, on a machine without a GPU: how a .cu compiles before
# spending device time on it (which loads are in flight together, what holds registers). cuobjdump and nvdisasm
# come from their PyPI wheels (cached in $CACHE); nvcc from PATH, as scripts/check_cuda_sources.sh.
#   scripts/kernel_sass.sh src/kernels/fp8_cast.cu                        # every kernel: registers, spills
#   scripts/kernel_sass.sh src/kernels/fp8_cast.cu fp8_rowwise_kernelI13__nv_bfloat16   # that one's SASS
#   LOADS=1 scripts/kernel_sass.sh src/kernels/fp8_cast.cu fp8_rowwise_kernelI13  # only its global loads/stores
# Found this way (2026-12-06): the factored FP8 casts issued one 16-byte load a thread at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: scripts/kernel_sass.sh FILE.cu [MANGLED-NAME-SUBSTRING]}
want=${2:-}
CACHE=${CACHE:-$HOME/.cache/lf-cuda-tools}
command -v nvcc > /dev/null || { echo "kernel_sass: expected nvcc on PATH (CUDA 12+), found none" >&2; exit 2; }
if [[ ! -x $CACHE/bin/cuobjdump || ! -x $CACHE/bin/nvdisasm ]]; then
  mkdir -p "$CACHE/whl" "$CACHE/bin"
  python3 -m pip download --no-deps -q -d "$CACHE/whl" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm 2>&1 | { grep -v "^WARNING: Location" || true; } >&2
  for w in "$CACHE"/whl/*.whl; do python3 -m zipfile -e "$w" "$CACHE/x/"; done
  for t in cuobjdump nvdisasm; do cp "$(find "$CACHE/x" -name "$t" -type f | head -1)" "$CACHE/bin/$t"; done
  chmod +x "$CACHE"/bin/*
fi
export PATH=$CACHE/bin:$PATH
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Xptxas -v -cubin -o "$cubin" "$src" 2>&1 |
  grep -E "Compiling entry|Used|spill" | paste - - - |
  sed -E 's/.*entry function .(_Z[^ ]*). for .sm_90a.(.*)Used ([0-9]+) registers.*/\3 registers  \1  \2/' |
  c++filt | sed -E 's/ptxas info.*//' | cut -c1-200
[[ -z $want ]] && exit 0
name=$(cuobjdump -elf "$cubin" | grep -oE "_Z[A-Za-z0-9_]*${want}[A-Za-z0-9_]*" | sort -u | head -1)
[[ -n $name ]] || { echo "kernel_sass: no kernel of $src matches '$want'" >&2; exit 2; }
echo "== $(echo "$name" | c++filt)"
if [[ ${LOADS:-0} == 1 ]]; then
  cuobjdump -sass -fun "$name" "$cubin" | grep -E "LDG|STG|BAR|SHFL" | awk '{$NF=""; print}'
else
  cuobjdump -sass -fun "$name" "$cubin"
fi
