#!/usr/bin/env bash
# The binary must run on a CPU without AVX-512 (or AVX2): only the two per-ISA kernels
# may contain ymm/zmm instructions. An inline function from a header included into
# host_adamw_avx512.cpp would be compiled for AVX-512 there and the linker could keep
# that copy for every caller; this catches it. Exit 77 (skip) without objdump.
#   check_isa_isolation.sh BINARY
set -euo pipefail
command -v objdump >/dev/null || { echo "skip: no objdump"; exit 77; }
bad=$(objdump -d --no-show-raw-insn -C "$1" |
  awk '/^[0-9a-f]+ <.*>:$/ { fn = $0 } /%[yz]mm/ { print fn }' | sort -u |
  grep -v -e 'lf::offload::detail::adamw_avx2(' -e 'lf::offload::detail::adamw_avx512(' || true)
if [[ -n $bad ]]; then
  echo "functions outside the ISA kernels use AVX registers (the binary would fault on older CPUs):"
  echo "$bad"
  exit 1
fi
echo "only adamw_avx2 / adamw_avx512 use ymm/zmm registers"
