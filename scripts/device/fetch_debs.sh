#!/usr/bin/env bash
# Run HERE (Debian 12, network): downloads the Debian .debs the GPU machine needs
# into .deps/debs (git-ignored; pass `.deps` in the device tool's `carry`).
# The GPU image (Ubuntu 24.04) has no apt and no network; scripts/device/build.sh
# unpacks these with `dpkg -x` into /tmp/lfdeps. Also copies ../shared/bench/*.py
# (the peer baselines) into .deps/bench. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEBS=(
  libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libcli11-dev libboost1.74-dev libboost-dev libgtest-dev libgmock-dev googletest
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libicu-dev libicu72 nlohmann-json3-dev
  pkgconf-bin libpkgconf3
  # cairo for src/train's plots: the -dev packages pkgconf needs to resolve cairo.pc
  # (its Requires.private), and the runtime libraries libcairo.so.2 links against.
  # Not glib/ffi/mount/selinux runtimes: only their .pc files are read, and keeping
  # their (older) libraries off LD_LIBRARY_PATH keeps the image's python intact.
  libcairo2-dev libcairo2 libglib2.0-dev libpixman-1-dev libpixman-1-0 libfontconfig-dev
  libfontconfig1 fontconfig-config libfreetype-dev libfreetype6 libpng-dev libpng16-16
  libxcb-shm0-dev libxcb-shm0 libxcb1-dev libxcb1 libxcb-render0-dev libxcb-render0
  libxrender-dev libxrender1 libx11-dev libx11-6 libx11-data libxext-dev libxext6
  libxau-dev libxau6 libxdmcp-dev libxdmcp6 x11proto-dev libffi-dev libexpat1-dev libexpat1
  libbrotli-dev libbrotli1 zlib1g-dev libbsd-dev libbsd0 libmd-dev libmd0 libmount-dev
  libselinux1-dev libsepol-dev libblkid-dev uuid-dev libsm-dev libice-dev
  # report_to: tensorboard (src/tfevents): protobuf-lite and protoc (~3 MB; not prometheus:
  # its 19 MB would not fit the 64 MiB carry, and promtool runs in the CPU tests).
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
)
mkdir -p .deps/debs
cd .deps/debs
for p in "${DEBS[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download "$p" 2>&1 | grep -v "unsandboxed" || true
done
# The peer baselines (../shared does not travel to the GPU machine).
mkdir -p ../bench
cp ../../../shared/bench/*.py ../bench/ 2>/dev/null || echo "fetch_debs: ../shared/bench not found; peer baselines unavailable"
ls -1 | wc -l | xargs echo "fetch_debs: .debs in .deps/debs:"
du -sh . | cut -f1 | xargs echo "fetch_debs: size"
# The same files unpacked, without docs, as one xz tarball (28 MB against the .debs' 46): carry
# `.deps/lfdeps.tar.xz` instead of `.deps/debs` and the peers' wheels still fit the device tool's 64 MiB.
if [[ ! -f ../lfdeps.tar.xz || -n $(find . -name '*.deb' -newer ../lfdeps.tar.xz) ]]; then
  tmp=$(mktemp -d)
  for d in *.deb; do dpkg -x "$d" "$tmp"; done
  rm -rf "$tmp"/usr/share/{doc,man,info,locale}
  tar -C "$tmp" -cf - . | xz -T0 -9 > ../lfdeps.tar.xz
  rm -rf "$tmp"
fi
du -sh ../lfdeps.tar.xz | cut -f1 | xargs echo "fetch_debs: .deps/lfdeps.tar.xz"
