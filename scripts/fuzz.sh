#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, in the asan preset's tree: clang, ASan + UBSan) and their
# seeds, and runs each target for a bounded time:
#   scripts/fuzz.sh [seconds] [target...]   (default 60 s for each of every target)
# Targets: gguf (the GGUF reader, loader and writer), model (a file through llm::Model::load, its
# vocabulary and a decode), blocks (every block type's decoder), tokenizer (SentencePiece and BPE,
# special tokens parsed or not), jinja (chat templates), server (request bodies to parameters).
# Seeds are generated into build/fuzz/, never committed: the files the GGUF tests craft, the small
# real models and tokenizer test strings of ../shared (TESSERA_SHARED_DIR) where they exist, the
# chat templates of tests/fixtures/chat_templates/, request bodies written here. Every target runs
# under -rss_limit_mb / -malloc_limit_mb, so an input that allocates without bound fails.
# Exits non-zero when any target found a crash, leak, timeout or out-of-memory; the failing input is
# left in build/fuzz/ (crash-*, leak-*, timeout-*, oom-*) and its target named at the end.
# TESSERA_TESTS=path/to/tessera_tests reuses a built test binary instead of building the release preset.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf model blocks tokenizer jinja server)
jobs="$(nproc)"
shared="${TESSERA_SHARED_DIR:-$PWD/../shared}"
out=build/fuzz
fuzzers=build/asan/fuzz
# The fuzzers run on the CPU: the OpenCL runtime linked into the asan tree looks for no device.
export TESSERA_OPENCL_DEVICES="${TESSERA_OPENCL_DEVICES:-none}"

wants() { [[ " ${targets[*]} " == *" $1 "* ]]; }

cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs" --target $(printf '%s_fuzzer ' "${targets[@]}") >/dev/null
mkdir -p "$out"

# fresh_dir NAME: an empty seed directory build/fuzz/NAME.
fresh_dir() {
  rm -rf "${out:?}/$1"
  mkdir -p "$out/$1"
  echo "$out/$1"
}

if wants gguf || wants model; then
  tests="${TESSERA_TESTS:-}"
  if [ -z "$tests" ]; then
    cmake --preset release >/dev/null
    cmake --build --preset release --target tessera_tests -j "$jobs" >/dev/null
    tests=build/release/tests/tessera_tests
  fi
  seeds="$(fresh_dir seeds)"
  # Every GGUF test but the CLI ones (they need the tessera program and add no seeds).
  TESSERA_GGUF_CORPUS="$PWD/$seeds" "$tests" --gtest_filter='Gguf*:-GgufCli*:*CliExits*' >/dev/null
fi

if wants model; then
  model_seeds="$(fresh_dir model_seeds)"
  # Real models, the smallest of each kind (a legacy quant, K-quants, a non-linear quant).
  for f in stories260K.gguf oracle/tiny-llama-q2_k.gguf oracle/tiny-llama-q4_k.gguf oracle/tiny-llama-iq4_nl.gguf; do
    if [ -f "$shared/models/$f" ]; then cp "$shared/models/$f" "$model_seeds/"; fi
  done
  cp "$seeds"/* "$model_seeds/"
fi

if wants blocks; then
  block_seeds="$(fresh_dir block_seeds)"
  # For each of the 17 types (the first byte), real float weights read as its blocks, and zeros.
  for t in $(seq 0 16); do
    byte="$(printf '\\%03o' "$t")"
    if [ -f "$shared/models/stories260K.gguf" ]; then
      { printf "$byte"; tail -c 4096 "$shared/models/stories260K.gguf"; } >"$block_seeds/type$t"
    fi
    { printf "$byte"; head -c 1024 /dev/zero; } >"$block_seeds/zero$t"
  done
fi

tokenizer_vocabs=""
if wants tokenizer; then
  tokenizer_seeds="$(fresh_dir tokenizer_seeds)"
  # The vocabularies after the fuzzer's own two (index 0 SentencePiece, 1 BPE), in this order.
  vocabs=()
  [ -f "$shared/models/stories260K.gguf" ] && vocabs+=("$shared/models/stories260K.gguf")
  for f in "$shared"/vocab/ggml-vocab-*.gguf; do [ -f "$f" ] && vocabs+=("$f"); done
  tokenizer_vocabs="$(IFS=:; echo "${vocabs[*]}")"
  # llama.cpp's test strings (*.inp), each as a seed for its own vocabulary in the four text modes
  # (add_special x parse_special) and for the two small vocabularies.
  write_strings() {  # write_strings INP VOCAB_INDEX
    # The selector byte is vocab * 8 + mode; the byte 0 (awk cannot print it) is written as the
    # same vocabulary one lap of the count later.
    awk -v dir="$tokenizer_seeds" -v v="$2" -v count="$((${#vocabs[@]} + 2))" \
      -v name="$(basename "$1" .gguf.inp)-$2" '
      function flush() { for (m = 0; m < 4; ++m) { f = sprintf("%s/%s-%d-%d", dir, name, n, m);
                           b = v * 8 + m; if (b == 0) b = count * 8
                           printf "%c%s", b, text > f; close(f) } ++n; text = ""; first = 1 }
      BEGIN { n = 0; text = ""; first = 1 }
      /^__ggml_vocab_test__$/ { flush(); next }
      { text = first ? $0 : text "\n" $0; first = 0 }
      END { if (!first) flush() }' "$1"
  }
  i=2
  for v in "${vocabs[@]}"; do
    if [ -f "$v.inp" ]; then write_strings "$v.inp" "$i"; fi
    i=$((i + 1))
  done
  if [ -f "$shared/vocab/ggml-vocab-llama-bpe.gguf.inp" ]; then
    write_strings "$shared/vocab/ggml-vocab-llama-bpe.gguf.inp" 0
    write_strings "$shared/vocab/ggml-vocab-llama-bpe.gguf.inp" 1
  fi
  printf '\x03<s>Hello <|end|> <x>\xe2\x96\x81 w\xc3\xb6rld</s>' >"$tokenizer_seeds/special"
fi

if wants jinja; then
  jinja_seeds="$(fresh_dir jinja_seeds)"
  cp tests/fixtures/chat_templates/*.jinja "$jinja_seeds"/
fi

if wants server; then
  server_seeds="$(fresh_dir server_seeds)"
  n=0
  while IFS= read -r body; do
    printf '%s' "$body" >"$server_seeds/body$n.json"
    n=$((n + 1))
  done <<'EOF'
{"model":"m","prompt":"Once upon a time","max_tokens":40,"temperature":0,"seed":1}
{"prompt":["Hi"],"stream":true,"stream_options":{"include_usage":true},"stop":["\n","."],"top_k":40,"top_p":0.9,"min_p":0.05,"repeat_penalty":1.1}
{"prompt":[1,2,3,300],"max_tokens":5.0,"n":1,"ignore_eos":true}
{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"max_completion_tokens":8}
{"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]},{"role":"assistant","content":null}],"stream":false}
{"prompt":"x","temperature":1e308,"top_p":-0.0,"seed":-1,"stop":"END"}
{"prompt":"x","logit_bias":{"3":100,"260":-100},"presence_penalty":1.5,"frequency_penalty":-2,"user":"u","cache_salt":"s"}
{"prompt":"x","max_tokens":9223372036854775808,"top_k":18446744073709551615,"tools":[],"tool_choice":"none","echo":false}
{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}],"response_format":{"type":"text"}}
EOF
  # Nesting at the bound and far beyond it, in the messages and in an unknown member.
  deep() { printf '%*s' "$1" '' | tr ' ' '['; printf '%*s' "$1" '' | tr ' ' ']'; }
  printf '{"messages":%s}' "$(deep 63)" >"$server_seeds/deep63.json"
  printf '{"messages":%s}' "$(deep 3000)" >"$server_seeds/deep3000.json"
  printf '{"prompt":"x","extra":{"a":%s}}' "$(deep 2000)" >"$server_seeds/deep_member.json"
fi

failed=()
# run NAME CORPUS SEEDS [libFuzzer flags]: the target for $seconds, its corpus kept between runs.
# -timeout: one input may take at most 10 s; -rss_limit_mb / -malloc_limit_mb: an input that makes
# the code allocate without bound is an out-of-memory failure; leaks are reported by ASan.
run() {
  local name="$1" seeds="$2"
  shift 2
  local corpus="$out/corpus/$name"
  mkdir -p "$corpus"
  echo "fuzz: $name: $(ls "$seeds" | wc -l) seeds, ${seconds} s"
  if ! "$fuzzers/${name}_fuzzer" "$corpus" "$seeds" -timeout=10 -max_total_time="$seconds" \
    -print_final_stats=1 -artifact_prefix="$out/" "$@"; then
    failed+=("$name")
  fi
}

wants gguf && run gguf "$seeds" -dict=fuzz/gguf.dict -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048
wants model && run model "$model_seeds" -dict=fuzz/gguf.dict -max_len=1300000 -rss_limit_mb=2048 \
  -malloc_limit_mb=2048
wants blocks && run blocks "$block_seeds" -max_len=16384 -rss_limit_mb=1024 -malloc_limit_mb=1024
export TESSERA_FUZZ_VOCABS="$tokenizer_vocabs"
wants tokenizer && run tokenizer "$tokenizer_seeds" \
  -dict=fuzz/tokenizer.dict -max_len=4096 -rss_limit_mb=4096 -malloc_limit_mb=2048
wants jinja && run jinja "$jinja_seeds" -dict=fuzz/jinja.dict -max_len=16384 -rss_limit_mb=2048 \
  -malloc_limit_mb=2048
wants server && run server "$server_seeds" -dict=fuzz/server.dict -max_len=8192 -rss_limit_mb=2048 \
  -malloc_limit_mb=2048

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $out/)" >&2
  exit 1
fi
echo "fuzz: every target ran ${seconds} s without a failure"
