#!/bin/sh
# Constrained (JSON schema) against unconstrained generation: tokens/s of `tessera run`, the median
# of REPS runs each, alternating. Usage: bench/grammar_bench.sh [MODEL] [N] [REPS] [THREADS]
set -eu
M=${1:-../shared/models/stories260K.gguf}
N=${2:-400}
REPS=${3:-7}
T=${4:-1}
BIN=${TESSERA:-build/release/tessera}
SCHEMA='{"type":"object","properties":{"title":{"type":"string","maxLength":40},"story":{"type":"string"},"characters":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}}},"required":["title","story","characters"]}'
rate() { sed -n 's/^generation: .*, \([0-9.]*\) tokens\/s$/\1/p'; }
free=""; constrained=""
i=0
while [ $i -lt "$REPS" ]; do
  free="$free $("$BIN" run -m "$M" -p "Once upon a time" -n "$N" --temp 0 -t "$T" -c 2048 2>&1 >/dev/null | rate)"
  constrained="$constrained $("$BIN" run -m "$M" -p "Once upon a time" -n "$N" --temp 0 -t "$T" -c 2048 --json-schema "$SCHEMA" 2>&1 >/dev/null | rate)"
  i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
f=$(median $free); c=$(median $constrained)
echo "unconstrained: $f tokens/s (median of $REPS)"
echo "json schema:   $c tokens/s (median of $REPS)"
awk -v f="$f" -v c="$c" 'BEGIN {printf "ratio: %.1f%%\n", 100 * c / f}'
