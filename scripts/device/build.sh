#!/usr/bin/env bash
# Run ON the GPU machine (device tool), from anywhere in the repo, with `.deps/lfdeps.tar.xz` (or
# `.deps/debs`) carried (scripts/device/fetch_debs.sh made both here):
#   scripts/device/build.sh            # unpack .debs, configure, build all, ctest
#   LF_DEVICE_TARGETS="lf-worker model_test" scripts/device/build.sh   # just these
# Builds against the image's torch (CUDA, sm_90a) into build-device/ (git-ignored, so a
# warm machine keeps it between calls). If the whole tree does not build (another
# component mid-change), it still builds lf-worker + model_test and says so; if it does
# not even configure, it builds scripts/device/model_only into build-device-model/.
# Source it (`. scripts/device/env.sh`) for the run-time environment only.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh

if [[ ! -f $LF_DEPS/.unpacked ]]; then
  mkdir -p "$LF_DEPS"
  # .deps/lfdeps.tar.xz (fetch_debs.sh: the same files, 28 MB instead of 46) leaves room in the 64 MiB carry.
  if [[ -f .deps/lfdeps.tar.xz ]]; then
    tar -C "$LF_DEPS" -xJf .deps/lfdeps.tar.xz || { echo "device/build: .deps/lfdeps.tar.xz did not unpack"; exit 2; }
  else
    ls .deps/debs/*.deb >/dev/null 2>&1 ||
      { echo "device/build: no .deps/lfdeps.tar.xz or .deps/debs (run scripts/device/fetch_debs.sh here and carry one)"; exit 2; }
    for d in .deps/debs/*.deb; do dpkg -x "$d" "$LF_DEPS"; done
  fi
  touch "$LF_DEPS/.unpacked"
fi

BUILD_DIR=${BUILD_DIR:-build-device}
# The unpacked protoc (report_to: tensorboard); without it src/tfevents builds its refusing stub.
[[ -x $LF_DEPS/usr/bin/protoc ]] && LF_DEPS_PROTOC=$LF_DEPS/usr/bin/protoc
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
t0=$(date +%s)
# configure SRC DIR: the flags every device build uses.
configure() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLF_WITH_TORCH=ON -DLF_WITH_CUDA=ON -DTORCH_CUDA_ARCH_LIST=9.0a \
    "-DCMAKE_PREFIX_PATH=$TP;$LF_DEPS/usr;$LF_DEPS/usr/lib/x86_64-linux-gnu/cmake" \
    "-DCMAKE_CXX_FLAGS=-I$LF_DEPS/usr/include" "-DLF_PYTHON=$(command -v python3)" \
    ${LF_DEPS_PROTOC:+"-DProtobuf_PROTOC_EXECUTABLE=$LF_DEPS_PROTOC"} \
    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$LF_DEPS/usr/lib/x86_64-linux-gnu:$LF_DEPS/lib/x86_64-linux-gnu" \
    > "$2.configure.log" 2>&1
}
status=full
if ! configure . "$BUILD_DIR"; then
  grep -E "CMake Error|not found" "$BUILD_DIR.configure.log" | head -8
  echo "device/build: the full tree does not configure; falling back to scripts/device/model_only"
  BUILD_DIR=$BUILD_DIR-model
  configure scripts/device/model_only "$BUILD_DIR" || { tail -30 "$BUILD_DIR.configure.log"; exit 1; }
  status=model-only
fi
echo "device/build: configured $BUILD_DIR in $(( $(date +%s) - t0 )) s"
if [[ -n "${LF_DEVICE_TARGETS:-}" ]]; then
  ninja -C "$BUILD_DIR" -j16 $LF_DEVICE_TARGETS || exit 1
  status=targets
elif ! ninja -C "$BUILD_DIR" -j16 -k 0 > "$BUILD_DIR.build.log" 2>&1; then
  grep -E "FAILED|error:" "$BUILD_DIR.build.log" | head -20
  echo "device/build: the full tree failed to build; building lf-worker and model_test only"
  status=partial
  if ! ninja -C "$BUILD_DIR" -j16 lf-worker model_test >> "$BUILD_DIR.build.log" 2>&1; then
    echo "device/build: those failed too; falling back to scripts/device/model_only"
    BUILD_DIR=$BUILD_DIR-model
    configure scripts/device/model_only "$BUILD_DIR" || { tail -30 "$BUILD_DIR.configure.log"; exit 1; }
    ninja -C "$BUILD_DIR" -j16 || exit 1
    status=model-only
  fi
fi
# model_bench.sh runs the lf-worker of the last successful build.
ln -sfn "$BUILD_DIR" build-device-last
echo "device/build: built ($status) in $(( $(date +%s) - t0 )) s"
if [[ "${LF_DEVICE_SKIP_TESTS:-0}" != 1 ]]; then
  if [[ $status == full || $status == model-only ]]; then
    (cd "$BUILD_DIR" && ctest --output-on-failure -j8 --timeout ${LF_CTEST_TIMEOUT:-600})
  else
    (cd "$BUILD_DIR" && ctest --output-on-failure -R model_test --timeout 600)
  fi
  echo "device/build: ctest rc=$? ($(( $(date +%s) - t0 )) s since configure)"
fi
