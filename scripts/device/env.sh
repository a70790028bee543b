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
