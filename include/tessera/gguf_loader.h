#pragma once
// Loading a GGUF file's tensors into any backend's buffers (zero copy for host memory).
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/gguf.h"

namespace tessera::gguf {

// Progress of a load: bytes done of bytes total.
using ProgressCallback = std::function<void(size_t done, size_t total)>;

struct LoadedTensors {
  // The buffer holding the tensors. For a zero-copy load it is a read-only view of the File's
  // mapping (set/clear throw): the File must outlive it and the tensors.
  std::unique_ptr<Buffer> buffer;
  std::map<std::string, Tensor*, std::less<>> tensors;  // descriptors created in the caller's Context
  bool zero_copy = false;
};

// Creates a descriptor for every tensor of `file` in ctx (which must not allocate data) and fills it:
// a host buffer type points straight into the mapping (zero copy); any other type gets one buffer
// and the bytes go through Buffer::set in chunks of about chunk_bytes (so device layouts apply).
// Error(Unsupported) when the file holds a tensor type Tessera lacks.
LoadedTensors load_tensors(const File& file, Context& ctx, BufferType& type,
                           const ProgressCallback& progress = {}, size_t chunk_bytes = 64u << 20);

}  // namespace tessera::gguf
