#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Idempotent.
set -euo pipefail
packages=(
  build-essential cmake ccache clang-format clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libcli11-dev libpcre2-dev nlohmann-json3-dev
  opencl-c-headers opencl-clhpp-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev clinfo
  libcpp-httplib-dev libboost1.81-dev nodejs chromium nginx-light libopenmpi-dev openmpi-bin
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm ships with some nodejs builds (NodeSource) and is its own package in Debian's.
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The npm packages of the server tests and of the Node binding, exactly as their lockfiles pin them:
# the OpenAI SDK (tests/server/sdk), puppeteer-core, which drives the system chromium
# (tests/server/page; it downloads no browser), and node-addon-api (bindings/node; its build script
# is not run here: scripts/test-node.sh builds the addon, with `npm ci --offline` from npm's cache
# that this fills). At install time only: the tests never reach the network.
root="$(cd "$(dirname "$0")/.." && pwd)"
for dir in "$root/tests/server/sdk" "$root/tests/server/page" "$root/bindings/node"; do
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    ignore_scripts=()
    if [ "$dir" = "$root/bindings/node" ]; then ignore_scripts=(--ignore-scripts); fi
    npm ci --prefix "$dir" --no-audit --no-fund --silent "${ignore_scripts[@]}"
  fi
done
