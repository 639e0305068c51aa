#pragma once
// GGUF v2/v3 files (../shared/OPS.md): a hardened, memory-mapped reader, an atomic writer,
// and loading of a file's tensors into any backend's buffers.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/dtype.h"

namespace tessera::gguf {

enum class ValueType : int32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view type_name(ValueType type) noexcept;

// An array value: element type plus the elements (numbers widened per type, or strings).
struct ArrayValue {
  ValueType type = ValueType::U8;
  std::vector<std::string> strings;  // when type == String
  std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>, std::vector<int16_t>,
               std::vector<uint32_t>, std::vector<int32_t>, std::vector<float>, std::vector<bool>,
               std::vector<uint64_t>, std::vector<int64_t>, std::vector<double>>
      numbers;  // otherwise
  size_t size() const noexcept;
};

using Value = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
                           ArrayValue, uint64_t, int64_t, double>;
ValueType value_type(const Value& v) noexcept;

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  int n_dims = 1;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint64_t offset = 0;  // relative to the data section
  size_t nbytes = 0;
};

class File {
 public:
  // Memory-maps and validates a file; every rule violation is Error(CorruptFile) naming the
  // byte offset, the field and what was wrong.
  static File open(const std::string& path);
  // Parses bytes the caller keeps alive (tests, fuzzing).
  static File parse(std::span<const std::byte> bytes);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  uint32_t version() const noexcept;
  size_t alignment() const noexcept;
  size_t data_offset() const noexcept;  // absolute offset of the data section
  size_t file_size() const noexcept;

  const std::vector<std::pair<std::string, Value>>& kvs() const noexcept;
  const Value* find(std::string_view key) const noexcept;
  // Typed getters: Error(InvalidArgument) on a missing key or a type mismatch (naming both).
  const Value& get(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const ArrayValue& get_array(std::string_view key) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  // Any unsigned/signed integer type that holds the value, widened (for keys whose writers vary).
  int64_t get_int(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const noexcept;
  const TensorInfo* find_tensor(std::string_view name) const noexcept;
  // Address of a tensor's bytes inside the mapping.
  const std::byte* tensor_data(const TensorInfo& info) const noexcept;

 private:
  struct Impl;
  explicit File(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Writer {
 public:
  Writer();
  ~Writer();
  void set(std::string key, Value value);  // replaces an existing key
  // Copies the bytes (row-major ggml image of the tensor).
  void add_tensor(std::string name, DType type, std::span<const int64_t> ne, const void* data, size_t nbytes);
  void set_alignment(uint32_t alignment);  // also written as general.alignment
  // Writes version 3 to path.tmp, then renames: a failure never leaves a half-written target.
  void write(const std::string& path) const;
  std::vector<std::byte> to_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Progress of a load: bytes done of bytes total.
using ProgressCallback = std::function<void(size_t done, size_t total)>;

struct LoadedTensors {
  std::unique_ptr<Buffer> buffer;  // null when tensors point into the mapping (zero copy)
  std::map<std::string, Tensor*, std::less<>> tensors;  // descriptors created in the caller's Context
};

// Creates a descriptor for every tensor of `file` in ctx and fills it: a host buffer type
// may point straight into the mapping (zero copy); any other type gets one buffer and the bytes
// go through Buffer::set in chunks of about chunk_bytes (so device layouts apply).
LoadedTensors load_tensors(const File& file, Context& ctx, BufferType& type,
                           const ProgressCallback& progress = {}, size_t chunk_bytes = 64u << 20);

}  // namespace tessera::gguf
