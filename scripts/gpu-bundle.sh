#!/usr/bin/env bash
# Prepares what a lent GPU machine needs to run scripts/gpu-check.sh (docs/GPU.md): that machine
# has the NVIDIA driver, CUDA and cmake but none of our build dependencies and no network, so the
# release build's programs travel with the shared libraries they link (not libc, libstdc++ or
# libgcc_s: the machine's own are newer, and the NVIDIA driver's libraries loaded into the process
# need them), a few oracle models and the peer's make_model.py. Output: gpu-bundle/ (git-ignored),
# passed to the device tool as `carry: ["gpu-bundle"]`; about 45 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
shared="$(cd ../shared && pwd)"
scripts/build.sh release >/dev/null
rm -rf gpu-bundle
mkdir -p gpu-bundle/lib gpu-bundle/shared/models/oracle gpu-bundle/shared/peer
for p in build/release/tessera build/release/tests/tessera_tests; do
  strip -o "gpu-bundle/$(basename "$p")" "$p"
done
ldd build/release/tessera build/release/tests/tessera_tests | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" gpu-bundle/lib/; done
# The tests read the models from the path compiled into them: gpu-check.sh links it there.
echo "$shared" >gpu-bundle/shared_path
git rev-parse HEAD >gpu-bundle/commit
cp "$shared/models/stories260K.gguf" gpu-bundle/shared/models/
for m in tiny-llama-f32 tiny-qwen3-f32 tiny-gemma2-f32 tiny-llama-q4_1 tiny-llama-q5_0 tiny-llama-q4_k \
  tiny-llama-q6_k tiny-llama-iq4_nl tiny-llama-q4_k_m tiny-llama-q5_k_m; do
  cp "$shared/models/oracle/$m".* gpu-bundle/shared/models/oracle/
done
cp "$shared/peer/make_model.py" gpu-bundle/shared/peer/
du -sh gpu-bundle
