#!/usr/bin/env bash
# Fuzzes the GGUF reader, then the chat template interpreter, each for a bounded time:
#   scripts/fuzz.sh [seconds]  (default 60, for each)
# GGUF seeds are the files the GGUF tests craft and write (generated here, never committed); template
# seeds are the real templates of tests/fixtures/chat_templates/. The fuzzers are
# clang's libFuzzer with ASan + UBSan. Exits non-zero on any crash, leak, timeout or out-of-memory;
# the failing input is left in build/fuzz/ (crash-*, leak-*, timeout-*, oom-*).
# TESSERA_TESTS=path/to/tessera_tests reuses a built test binary instead of building the release preset.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
jobs="$(nproc)"

tests="${TESSERA_TESTS:-}"
if [ -z "$tests" ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target tessera_tests -j "$jobs" >/dev/null
  tests=build/release/tests/tessera_tests
fi

seeds=build/fuzz/seeds
corpus=build/fuzz/corpus
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus"
# Every GGUF test but the CLI ones (they need the tessera program and add no seeds).
TESSERA_GGUF_CORPUS="$PWD/$seeds" "$tests" --gtest_filter='Gguf*:-GgufCli*:*CliExits*' >/dev/null
echo "fuzz: $(ls "$seeds" | wc -l) seed files"

CC=clang CXX=clang++ cmake -S fuzz -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j "$jobs" >/dev/null

# -timeout: one input may take at most 10 s; -rss_limit_mb: an input that makes the reader allocate
# without bound is an out-of-memory failure; leaks are reported by ASan (detect_leaks is on).
build/fuzz/gguf_fuzzer "$corpus" "$seeds" \
  -dict=fuzz/gguf.dict -max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
  -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix=build/fuzz/

jinja_seeds=build/fuzz/jinja_seeds
jinja_corpus=build/fuzz/jinja_corpus
rm -rf "$jinja_seeds"
mkdir -p "$jinja_seeds" "$jinja_corpus"
cp tests/fixtures/chat_templates/*.jinja "$jinja_seeds"/
exec build/fuzz/jinja_fuzzer "$jinja_corpus" "$jinja_seeds" \
  -dict=fuzz/jinja.dict -max_len=16384 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
  -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix=build/fuzz/
