#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Idempotent.
set -euo pipefail
packages=(
  build-essential cmake ccache clang-format clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libcli11-dev libpcre2-dev nlohmann-json3-dev
  opencl-c-headers opencl-clhpp-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev clinfo
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
