#!/usr/bin/env bash
# The C API's ABI record: include/tessera.h's declarations (comments and layout removed, one per
# line) and its version, kept in tests/capi/tessera_h.abi.
#   scripts/capi-abi.sh --check    fails when the declarations differ from the record: with the
#                                  same version (a change without a version bump), or with a new
#                                  version not yet recorded
#   scripts/capi-abi.sh --update   records the header as it is (after bumping the version)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
header="$root/include/tessera.h"
record="$root/tests/capi/tessera_h.abi"

version() {
  local v=()
  for part in MAJOR MINOR PATCH; do
    v+=("$(sed -n "s/^#define TESSERA_VERSION_${part} \([0-9]*\)$/\1/p" "$header")")
  done
  echo "${v[0]}.${v[1]}.${v[2]}"
}

# Comments out (the preprocessor, macros kept unexpanded), then one declaration per line with
# single spaces; the version macros are the record's first line instead.
declarations() {
  echo "version $(version)"
  cpp -fpreprocessed -dD -P -x c "$header" 2>/dev/null |
    grep -v '^#define TESSERA_VERSION_' |
    awk '
      function flush() { gsub(/[ \t]+/, " ", code); n = split(code, parts, /[;{}]/); code = "" }
      /^#/ { print; next }
      { code = code " " $0; while (match(code, /[;{}]/)) { piece = substr(code, 1, RSTART);
          code = substr(code, RSTART + 1); gsub(/[ \t]+/, " ", piece); sub(/^ /, "", piece);
          gsub(/\( /, "(", piece); gsub(/ \)/, ")", piece);
          if (piece != "") print piece } }
      END { gsub(/[ \t]+/, " ", code); sub(/^ /, "", code); if (code != "" && code != " ") print code }'
}

case "${1:-}" in
  --update)
    declarations >"$record"
    echo "recorded $(version) in $record"
    ;;
  --check)
    # One version everywhere: the project's, the C header's, the C++ library's.
    project="$(sed -n 's/^project(tessera VERSION \([0-9.]*\) .*/\1/p' "$root/CMakeLists.txt")"
    cxx="$(sed -n 's/.*kVersion = "\([0-9.]*\)".*/\1/p' "$root/include/tessera/version.h")"
    string="$(sed -n 's/^#define TESSERA_VERSION_STRING "\(.*\)"$/\1/p' "$header")"
    if [ "$project" != "$(version)" ] || [ "$cxx" != "$(version)" ] || [ "$string" != "$(version)" ]; then
      echo "versions differ: CMakeLists.txt $project, include/tessera/version.h $cxx," \
        "include/tessera.h $(version) (string $string)" >&2
      exit 1
    fi
    current="$(declarations)"
    if [ "$current" = "$(cat "$record")" ]; then
      echo "include/tessera.h matches its ABI record ($(version))"
      exit 0
    fi
    recorded_version="$(head -1 "$record")"
    diff <(echo "$current") "$record" | head -40 || true
    if [ "$recorded_version" = "version $(version)" ]; then
      echo "include/tessera.h changed its declarations without a version bump: bump TESSERA_VERSION_*" \
        "(and the project's VERSION), then run scripts/capi-abi.sh --update" >&2
    else
      echo "include/tessera.h is at $(version), its ABI record at ${recorded_version#version }:" \
        "run scripts/capi-abi.sh --update" >&2
    fi
    exit 1
    ;;
  *)
    echo "usage: scripts/capi-abi.sh --check|--update" >&2
    exit 2
    ;;
esac
