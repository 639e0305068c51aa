#!/usr/bin/env bash
# Regenerates README.md's op x type support tables from `tessera test-ops --mode support`
# (every device present; PoCL provides two OpenCL devices on machines without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release >/dev/null
export POCL_DEVICES="${POCL_DEVICES:-pthread pthread}"
tables=$(build/release/tessera test-ops --mode support)
python3 - "$tables" <<'PY'
import re, sys
tables = sys.argv[1].strip()
readme = open("README.md").read()
begin, end = "<!-- support-table:begin -->", "<!-- support-table:end -->"
new = f"{begin}\n{tables}\n{end}"
readme, n = re.subn(re.escape(begin) + ".*?" + re.escape(end), lambda m: new, readme, flags=re.S)
if n != 1:
    sys.exit("README.md has no support-table markers")
open("README.md", "w").write(readme)
PY
echo "README.md support tables updated"
