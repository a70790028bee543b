# Sourced by scripts/device/*.sh on the GPU machine: where the unpacked .debs live and
# the environment lf-train's binaries need there.
export LF_DEPS=${LF_DEPS:-/tmp/lfdeps}
export PKG_CONFIG=$LF_DEPS/usr/bin/pkgconf
export PKG_CONFIG_LIBDIR=$LF_DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$LF_DEPS/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$LF_DEPS
export LD_LIBRARY_PATH=$LF_DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# fontconfig-config's file (cairo's text); the image has none.
[[ -f $LF_DEPS/etc/fonts/fonts.conf ]] && export FONTCONFIG_FILE=$LF_DEPS/etc/fonts/fonts.conf
[[ -d /usr/local/cuda/bin ]] && export PATH=/usr/local/cuda/bin:$PATH
# NVLink multicast stays off on these machines (see the device tool's KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

# The device build's lf-train-local for a bench script (a warm machine keeps $BUILD): rebuilt unless
# REBUILD=0 and it exists. $1: the caller's name (its log: $OUT/<name>_build.log); $2: the ninja targets
# (default lf-train-local).
lf_build_local() {
  local name=$1 targets=${2:-lf-train-local} t0
  if [[ -x $BUILD/src/train/lf-train-local && ${REBUILD:-1} != 1 ]]; then return 0; fi
  t0=$(date +%s)
  LF_DEVICE_TARGETS="$targets" scripts/device/build.sh > "$OUT/${name}_build.log" 2>&1 ||
    { tail -30 "$OUT/${name}_build.log"; echo "$name: build failed"; return 1; }
  echo "$name: built $targets in $(( $(date +%s) - t0 )) s"
}

# The peer's wheels the image lacks (no network on the machine), installed from .deps/wheels unless
# the check (python code) already passes. $1: the caller's name; $2: the check.
lf_peer_wheels() {
  local name=$1 check=$2
  python3 -c "$check" 2>/dev/null && return 0
  ls .deps/wheels/*.whl >/dev/null 2>&1 || { echo "$name: no .deps/wheels (see the header)"; return 2; }
  python3 -m pip install -q --no-deps --no-index .deps/wheels/*.whl 2>&1 | tail -3
}
