// Loading a GGUF file's tensors into buffers: zero copy for host memory, chunked Buffer::set otherwise.
#include "tessera/gguf_loader.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace tessera::gguf {
namespace {

// A read-only view of a File's mapping, so zero-copy tensors still have a buffer (and thus a
// location the scheduler can see). Writing would fault on the read-only pages: refuse instead.
class MappedBuffer final : public Buffer {
 public:
  MappedBuffer(BufferType& type, const std::byte* base, size_t size, const std::string& source)
      : Buffer(type, size), base_(base), source_(source) {}
  void* base() const override { return const_cast<std::byte*>(base_); }
  void set(Tensor& t, const void*, size_t, size_t) override {
    raise(ErrorCode::InvalidArgument, "tensor {} lives in the read-only mapping of {}; copy it to modify it",
          t.describe(), source_);
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    std::memcpy(dst, static_cast<const char*>(t.data) + offset, size);
  }
  void clear(uint8_t) override {
    raise(ErrorCode::InvalidArgument, "the tensors of {} live in a read-only mapping", source_);
  }

 private:
  const std::byte* base_;
  std::string source_;
};

// Drops mapped pages already copied out, so loading a large file never keeps more than about
// one chunk of it resident (the pages come back from the file if anyone reads them again).
size_t round_up(size_t n, size_t alignment) {
  return alignment <= 1 ? n : (n + alignment - 1) / alignment * alignment;
}

}  // namespace

LoadedTensors load_tensors(const File& file, Context& ctx, BufferType& type, const ProgressCallback& progress,
                           size_t chunk_bytes) {
  if (ctx.allocates_data())
    raise(ErrorCode::InvalidArgument,
          "load_tensors: {}: the Context must not allocate data (the tensors get memory from a buffer)",
          file.source());
  const auto& infos = file.tensors();
  for (const auto& info : infos)
    if (!info.supported())
      raise(ErrorCode::Unsupported, "{}: tensor '{}' has type {} (ggml id {}), which Tessera cannot load yet",
            file.source(), info.name, info.type_name(), info.type_id);

  LoadedTensors out;
  std::vector<Tensor*> created;
  created.reserve(infos.size());
  size_t total = 0;
  bool zero_copy = type.is_host();
  for (const auto& info : infos) {
    Tensor* t = ctx.new_tensor(*info.type, std::span<const int64_t>(info.ne.data(), 4));
    t->name = info.name;
    t->flags |= kFlagWeight;
    TESSERA_ASSERT(t->nbytes() == info.nbytes);
    created.push_back(t);
    out.tensors.emplace(info.name, t);
    total += info.nbytes;
    if (type.alloc_size(*t) != info.nbytes) zero_copy = false;
  }

  if (zero_copy) {
    const auto bytes = file.bytes();
    const size_t start = std::min(file.data_offset(), bytes.size());
    out.buffer =
        std::make_unique<MappedBuffer>(type, bytes.data() + start, bytes.size() - start, file.source());
    for (size_t i = 0; i < infos.size(); ++i) out.buffer->place(*created[i], infos[i].offset);
    out.zero_copy = true;
    if (progress) progress(total, total);
    return out;
  }
  if (infos.empty()) return out;

  std::vector<size_t> offsets(infos.size());
  size_t size = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    size = round_up(size, type.alignment());
    offsets[i] = size;
    size += type.alloc_size(*created[i]);
  }
  out.buffer = type.allocate(std::max<size_t>(size, 1));
  for (size_t i = 0; i < infos.size(); ++i) out.buffer->place(*created[i], offsets[i]);

  size_t done = 0;
  if (progress) progress(0, total);
  for (size_t i = 0; i < infos.size(); ++i) {
    Tensor& t = *created[i];
    const std::byte* src = file.tensor_data(infos[i]);
    // Chunks cover whole blocks so a device can re-lay them (OPS.md: any range of whole blocks).
    const size_t block = traits(t.type).block_bytes;
    const size_t step = std::max(block, chunk_bytes / block * block);
    for (size_t o = 0; o < infos[i].nbytes; o += step) {
      const size_t n = std::min(step, infos[i].nbytes - o);
      out.buffer->set(t, src + o, o, n);
      file.release_pages(src + o, n);
      done += n;
      if (progress) progress(done, total);
    }
  }
  return out;
}

}  // namespace tessera::gguf
