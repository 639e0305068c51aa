#!/usr/bin/env bash
# Runs on a lent GPU machine (device tool; docs/GPU.md), from the repository root, over the
# programs scripts/gpu-bundle.sh prepared here: `bash scripts/gpu-check.sh [quick|7b]` with
# carry ["gpu-bundle"]. Each step has its own time limit and the script goes on after a failure;
# everything is written to $OUT/gpu-check.txt (the table for docs/GPU.md) as well as stdout.
#   quick (default, about 6 minutes): the GPU and driver; `tessera devices` with the real driver;
#     the seam's conformance suite on CUDA (memory, copies, streams, events, host functions, VMM)
#     and on OpenCL through NVIDIA's OpenCL driver; test-ops on that OpenCL device; the bundled
#     oracles with every layer on it; bench of the built-in m250-shaped model, CPU against OpenCL.
#   7b: a 7B-shaped Llama (4096 wide, 32 layers, 32/8 heads, FFN 11008, 32000 tokens) written by
#     the peer's make_model.py in f16, quantized to Q4_0, and benched on OpenCL0 (about 8 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-quick}"
B="$PWD/gpu-bundle"
OUT="${OUT:-/tmp/gpu-check}"
mkdir -p "$OUT"
log="$OUT/gpu-check.txt"
: >"$log"
[ -x "$B/tessera" ] || { echo "gpu-check: no gpu-bundle/ (run scripts/gpu-bundle.sh here first and carry it)" | tee -a "$log"; exit 2; }
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The tests open the models at the path compiled into them.
shared_path="$(cat "$B/shared_path")"
if [ ! -e "$shared_path" ]; then mkdir -p "$(dirname "$shared_path")" && ln -s "$B/shared" "$shared_path"; fi
# NVIDIA's OpenCL driver, through the bundled ICD loader: an ICD file naming its library.
icd_lib="$(find / -xdev \( -path /proc -o -path /sys \) -prune -o -name 'libnvidia-opencl.so.1' -print 2>/dev/null | head -1)"
if [ -z "$icd_lib" ]; then icd_lib="$(ldconfig -p | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')"; fi
mkdir -p "$OUT/icd"
[ -n "$icd_lib" ] && echo "$icd_lib" >"$OUT/icd/nvidia.icd"
export OCL_ICD_VENDORS="$OUT/icd"
# A dry run on a machine without NVIDIA's driver (the CPU machine, PoCL) names another ICD folder.
[ -n "${GPU_CHECK_ICD_DIR:-}" ] && export OCL_ICD_VENDORS="$GPU_CHECK_ICD_DIR"

failures=0
step() {  # step NAME SECONDS COMMAND...: runs it, its output to the log, its status and time after
  local name="$1" limit="$2"
  shift 2
  echo "== $name" | tee -a "$log"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  echo "-- $name: exit $rc, $((SECONDS - t0)) s" | tee -a "$log"
  [ "$rc" -eq 0 ] || failures=$((failures + 1))
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(cat "$B/commit")"
  echo "OpenCL ICD: ${icd_lib:-none found}"
} | tee -a "$log"
step "GPU and driver" 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
step "tessera devices" 60 "$B/tessera" devices

if [ "$mode" = quick ]; then
  step "seam conformance: CUDA (real driver) and OpenCL (NVIDIA)" 180 "$B/tessera_tests" \
    '--gtest_filter=EveryRuntime/Seam.*/CUDA:EveryRuntime/Seam.*/OpenCL:GgufLoader.EveryDeviceReadsBackTheFileBytes:CudaLoader.*'
  step "test-ops OpenCL0" 240 "$B/tessera" test-ops -b OpenCL0
  filter=""
  for f in "$B"/shared/models/oracle/*.gguf; do
    n="$(basename "$f" .gguf)"
    filter="$filter:Files/ArchitectureOracle.Matches/OpenCL0_${n//-/_}"
  done
  step "oracles, every layer on OpenCL0" 180 "$B/tessera_tests" "--gtest_filter=${filter#:}"
  step "bench m250-shaped Q4_0: CPU (16 threads) and OpenCL0" 240 "$B/tessera" bench --type q4_0 -p 512 -n 128 -r 3 -t 16
elif [ "$mode" = 7b ]; then
  m="$OUT/llama7b"
  step "make a 7B-shaped f16 Llama" 300 python3 "$B/shared/peer/make_model.py" "$m-f16.gguf" f16 --dim 4096 \
    --layers 32 --heads 32 --kv-heads 8 --ff 11008
  step "quantize it to Q4_0" 240 "$B/tessera" quantize "$m-f16.gguf" "$m-q4_0.gguf" q4_0 -t 16
  rm -f "$m-f16.gguf"
  step "bench 7B Q4_0 on OpenCL0" 240 "$B/tessera" bench -m "$m-q4_0.gguf" -p 512 -n 128 -r 3 -ngl 99 --device OpenCL0
  rm -f "$m-q4_0.gguf"
else
  echo "gpu-check: unknown mode '$mode' (quick or 7b)" | tee -a "$log"
  exit 2
fi
echo "gpu-check: $failures step(s) failed" | tee -a "$log"
[ "$failures" -eq 0 ]
