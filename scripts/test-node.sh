#!/usr/bin/env bash
# The Node binding (bindings/node): builds it from source and runs its tests.
#   scripts/test-node.sh [preset]   (default release)
# `npm ci` from the committed package-lock.json, offline (scripts/install-deps.sh put the packages in
# npm's cache at install time; the tests never reach the network), runs the package's install script:
# libtessera.so with the CMake preset, then the addon against /usr/include/node. The tests compare
# with the preset's tessera CLI, built here too, and skip without ../shared (the test model).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
export TESSERA_PRESET="$preset"
npm ci --prefix bindings/node --offline --foreground-scripts --no-audit --no-fund
cmake --build --preset "$preset" -j"$(nproc)" --target tessera_cli
export TESSERA_SHARED_DIR="${TESSERA_SHARED_DIR:-$(cd .. && pwd)/shared}"
cd bindings/node
npm test
