#pragma once
// Internals shared by the GGUF reader, writer and loader.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "tessera/gguf.h"

namespace tessera::gguf {

// Keeps a file's bytes alive: a read-only mapping (unmapped on destruction) or, with
// OpenOptions::mmap off, a heap copy (freed on destruction).
struct Mapping {
  void* address = nullptr;
  size_t size = 0;
  bool mapped = true;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
};

struct File::Impl {
  std::string source;
  std::unique_ptr<Mapping> mapping;  // null when parsing caller-owned bytes
  std::span<const std::byte> bytes;  // the whole file, or (metadata only) a prefix holding its infos
  size_t file_size = 0;
  // OpenOptions::metadata_only: the open file, which read_tensor reads from.
  std::optional<file_io::ReadableFile> file;
  // map_tensor's mappings of single tensors of such a file, unmapped with it.
  std::vector<std::unique_ptr<Mapping>> tensor_maps;
  uint32_t version = 3;
  size_t alignment = kDefaultAlignment;
  size_t data_offset = 0;
  std::vector<std::pair<std::string, Value>> kvs;
  std::vector<size_t> kv_offsets;
  std::map<std::string, size_t, std::less<>> kv_index;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> tensor_index;
};

// Rounds up to a multiple of a power of two.
constexpr size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) & ~(alignment - 1); }

}  // namespace tessera::gguf
