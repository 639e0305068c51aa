#pragma once
// Why a runtime that the build includes has no device here ("CUDA": "libcuda.so.1 not found: no
// NVIDIA driver"). Runtime factories record it while the Registry is made; `tessera devices`
// prints it, so a missing device is explained rather than silently absent.
#include <string>
#include <vector>

namespace tessera {

struct RuntimeNote {
  std::string runtime;  // "CUDA"
  std::string reason;   // one line
};

// Every note recorded so far: all of them once Registry::instance() has returned.
std::vector<RuntimeNote> runtime_notes();

// For runtime factories: `runtime` adds no device (or fewer than it might) because of `reason`.
void note_runtime_unavailable(std::string runtime, std::string reason);

}  // namespace tessera
