#!/usr/bin/env bash
# Sets up, builds and runs the main job on its built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release >/dev/null
exec build/release/tessera demo
