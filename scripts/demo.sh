#!/usr/bin/env bash
# Sets up, builds and runs the main job on its built-in default: the devices, then a benchmark of
# a built-in synthetic 250M Llama (Q4_0) on every device present (pp and tg tokens/s).
# Extra arguments go to `tessera bench` (e.g. scripts/demo.sh -p 512 -n 128 -r 5).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release >/dev/null
build/release/tessera devices
echo
exec build/release/tessera bench -p 128 -n 32 -r 3 "$@"
