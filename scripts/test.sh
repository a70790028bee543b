#!/usr/bin/env bash
# THE test command (README, .ci/run): installs what it needs, builds, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --python
scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 -j 2 "$@"
