#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Idempotent.
set -euo pipefail
packages=(
  build-essential cmake ccache clang-format clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libcli11-dev libpcre2-dev nlohmann-json3-dev
  opencl-c-headers opencl-clhpp-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev clinfo
  libcpp-httplib-dev nlohmann-json3-dev nodejs
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
# The OpenAI SDK for the server test (tests/server/sdk), exactly as its lockfile pins it. At
# install time only: the tests never reach the network.
sdk="$(cd "$(dirname "$0")/.." && pwd)/tests/server/sdk"
if [ ! -d "$sdk/node_modules/openai" ] || [ "$sdk/package-lock.json" -nt "$sdk/node_modules/.package-lock.json" ]; then
  npm ci --prefix "$sdk" --no-audit --no-fund --silent
fi
