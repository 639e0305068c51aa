#!/usr/bin/env bash
# Sets up, builds and runs the test suite of a preset: scripts/test.sh [release|debug|asan|tsan|release-noocl]
# (tsan runs the threaded parts only: its test preset filters them)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/install-deps.sh
scripts/build.sh "$preset"
# Two PoCL devices so multi-device paths run for real (a user's GPUs need nothing).
export POCL_DEVICES="${POCL_DEVICES:-pthread pthread}"
ctest --preset "$preset"
