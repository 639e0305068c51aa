#!/usr/bin/env bash
# Long-run check (issue 15; not a unit test: it takes minutes): generates 10,000 tokens from
# stories260K with a 12,288-token context, printing tokens/s and RSS for every 500-token window,
# and fails unless RSS stays flat once the KV cache is allocated (after the first window).
#   scripts/long-run.sh [tessera binary] [model]   (defaults: build/release/tessera, stories260K)
# LONG_RUN_TOKENS, LONG_RUN_CTX, LONG_RUN_WINDOW and LONG_RUN_RSS_SLACK_MIB (default 4) override.
set -euo pipefail
cd "$(dirname "$0")/.."
tessera="${1:-build/release/tessera}"
model="${2:-../shared/models/stories260K.gguf}"
tokens="${LONG_RUN_TOKENS:-10000}"
ctx="${LONG_RUN_CTX:-12288}"
window="${LONG_RUN_WINDOW:-500}"
slack="${LONG_RUN_RSS_SLACK_MIB:-4}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# --ignore-eos: the story would otherwise end after a few hundred tokens; --temp 0.8 keeps it varied.
TESSERA_OPENCL_DEVICES="${TESSERA_OPENCL_DEVICES:-none}" "$tessera" run -m "$model" -p "Once upon a time" \
  -n "$tokens" -c "$ctx" --temp 0.8 -s 42 -t 2 --ignore-eos --stats-every "$window" 2>"$log" >/dev/null
grep -E "^(stats|load|prompt|generation):" "$log"
# Flat: every window after the first within `slack` MiB of the second window's RSS.
awk -v slack="$slack" -v want="$((tokens / window - 1))" '
  /^stats:/ { for (i = 1; i <= NF; ++i) if ($i == "RSS") rss = $(i + 1); n++;
              if (n == 2) base = rss; if (n >= 2) { if (rss - base > max) max = rss - base; if (base - rss > max) max = base - rss } }
  END { printf "long-run: %d windows, RSS after the first window within %.1f MiB of %.1f MiB (slack %s)\n", n, max, base, slack;
        if (n < want) { print "long-run: fewer windows than expected" > "/dev/stderr"; exit 1 }
        if (max > slack) { print "long-run: RSS is not flat" > "/dev/stderr"; exit 1 } }' "$log"
