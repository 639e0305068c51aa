#!/usr/bin/env bash
# Installs a built tree into a scratch prefix and builds programs against it out of tree, with
# CMake (find_package(tessera)) and with pkg-config, in C and in C++; each must print the greedy
# text the installed CLI prints: scripts/test-package.sh BUILD_DIR MODEL.gguf
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
model="$2"
[ -f "$model" ] || { echo "skipped: $model is absent"; exit 77; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
prompt="Once upon a time"
n=48
expected="$("$prefix/bin/tessera" run -m "$model" -p "$prompt" -n $n --temp 0 2>/dev/null)"
[ -n "$expected" ] || { echo "the installed CLI printed nothing" >&2; exit 1; }

cmake -S "$root/tests/package" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" -j2 >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c11 -o "$work/greedy_c_pc" "$root/tests/package/greedy.c" $(pkg-config --cflags --libs tessera) \
  -Wl,-rpath,"$prefix/lib"
c++ -O2 -o "$work/greedy_cxx_pc" "$root/tests/package/greedy.cpp" $(pkg-config --cflags --libs tessera-cxx) \
  -Wl,-rpath,"$prefix/lib"

status=0
for program in "$work/cmake/greedy_c" "$work/cmake/greedy_cxx" "$work/greedy_c_pc" "$work/greedy_cxx_pc"; do
  got="$("$program" "$model" "$prompt" $n)"
  if [ "$got" = "$expected" ]; then
    echo "ok: ${program#$work/}"
  else
    echo "differs: ${program#$work/}" >&2
    diff <(echo "$expected") <(echo "$got") >&2 || true
    status=1
  fi
done
exit $status
