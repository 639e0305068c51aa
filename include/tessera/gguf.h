#pragma once
// GGUF v2/v3 files (../shared/OPS.md): a hardened, memory-mapped reader and an atomic writer.
// Loading a file's tensors into buffers is tessera/gguf_loader.h.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "tessera/dtype.h"
#include "tessera/tensor.h"

namespace tessera::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr size_t kMaxNameBytes = 63;  // tensor names are under 64 bytes (ggml's limit with its NUL)

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
// "u8", "string", "array", ... ("?" for an id outside the enum).
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

  // Builds an array of numbers (element type from T) or of strings.
  template <typename T>
  static ArrayValue of(std::vector<T> values);
  static ArrayValue of(std::vector<std::string> values) {
    ArrayValue a;
    a.type = ValueType::String;
    a.strings = std::move(values);
    return a;
  }
};

using Value = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
                           ArrayValue, uint64_t, int64_t, double>;
// The variant's index is the GGUF type id.
ValueType value_type(const Value& v) noexcept;
// Equal type and value; floats compared bit for bit (so NaN payloads and -0 count).
bool same_value(const Value& a, const Value& b) noexcept;

template <typename T>
ArrayValue ArrayValue::of(std::vector<T> values) {
  using Numbers = decltype(ArrayValue::numbers);
  static_assert(std::is_constructible_v<Numbers, std::vector<T>>, "not a GGUF array element type");
  ArrayValue a;
  a.numbers = Numbers(std::move(values));
  // numbers' alternatives are the numeric types in id order, with String (8) and Array (9) left out.
  const auto i = static_cast<int32_t>(a.numbers.index());
  a.type = static_cast<ValueType>(i < 8 ? i : i + 2);
  return a;
}

// Every tensor type ggml defines (ids as in GGUF), whether or not Tessera computes with it.
struct GgmlType {
  std::string_view name;  // ggml's spelling: "f32", "q4_K", "iq2_xxs", ...
  int64_t block_size;     // elements per block
  size_t block_bytes;     // bytes per block
};
// nullptr for ids ggml does not define (or has retired).
const GgmlType* ggml_type(uint32_t id) noexcept;

struct TensorInfo {
  std::string name;
  // Empty for a ggml type Tessera has no DType for (such a tensor can be dumped, never loaded):
  // there is no default, so no caller can mistake an unknown type for a known one.
  std::optional<DType> type;
  uint32_t type_id = 0;  // the ggml type id in the file
  int n_dims = 1;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint64_t offset = 0;  // relative to the data section
  size_t nbytes = 0;
  size_t info_offset = 0;  // absolute offset of this tensor's info record (for messages)

  bool supported() const noexcept { return type.has_value(); }
  // ggml's spelling of the file's type ("q4_K"), or "type N" for an id ggml does not define.
  std::string type_name() const;
  // The DType; Error(Unsupported) naming the tensor and its ggml type when Tessera lacks it.
  DType dtype() const;
  // A contiguous descriptor (type, ne, nb, name) without data; Error(Unsupported) for types Tessera lacks.
  Tensor descriptor() const;
};

struct OpenOptions {
  // true: map the file (pages read on demand and shared with the page cache; CPU weights are used
  // in place). A file truncated or rewritten while mapped can then kill the process (SIGBUS).
  // false: read the whole file into memory (costs its size in RAM and the read time at open, and
  // later changes to the file cannot affect the process).
  bool mmap = true;
  // Read only the header, the keys and the tensor infos (from the file's start, as far as they
  // go), neither mapping nor reading the tensors: tensor_data() is then nullptr and read_tensor()
  // reads a tensor from the file. For a process that computes with a part of a file's tensors (a
  // pipeline stage), whose address space the whole file might not fit. `mmap` is ignored.
  bool metadata_only = false;
};

class File {
 public:
  // Maps (or reads) and validates a file; every rule violation is Error(CorruptFile) naming the
  // byte offset, the field and what was wrong. Error(Io) when it cannot be opened, is not a
  // regular file (a FIFO or a device is refused without blocking), or cannot be mapped or read.
  static File open(const std::string& path, const OpenOptions& options = {});
  // Parses bytes the caller keeps alive (tests, fuzzing). `source` names them in messages.
  static File parse(std::span<const std::byte> bytes, std::string source = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  uint32_t version() const noexcept;
  size_t alignment() const noexcept;
  size_t data_offset() const noexcept;  // absolute offset of the data section
  size_t file_size() const noexcept;
  const std::string& source() const noexcept;  // the path (or the name given to parse)
  std::span<const std::byte> bytes() const noexcept;
  struct Impl;  // opaque outside the library

  const std::vector<std::pair<std::string, Value>>& kvs() const noexcept;
  // Absolute offset of each KV record, in kvs() order.
  const std::vector<size_t>& kv_offsets() const noexcept;
  const Value* find(std::string_view key) const noexcept;
  // Typed getters: Error(InvalidArgument) on a missing key or a type mismatch (naming both).
  // The scalar getters want exactly their type.
  const Value& get(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const ArrayValue& get_array(std::string_view key) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  // Arrays of F32 (or F64, narrowed).
  std::vector<float> get_f32_array(std::string_view key) const;
  // Arrays of any integer type whose every element fits in int32.
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  // Any unsigned/signed integer type that holds the value, widened (for keys whose writers vary).
  int64_t get_int(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const noexcept;
  const TensorInfo* find_tensor(std::string_view name) const noexcept;
  // Address of a tensor's bytes inside the mapping (nullptr when opened metadata_only).
  const std::byte* tensor_data(const TensorInfo& info) const noexcept;
  // Copies a tensor's info.nbytes bytes to dst: from the mapping, or read from the file when it was
  // opened metadata_only (Error(Io) when the read fails or the file has shrunk since).
  void read_tensor(const TensorInfo& info, void* dst) const;
  // Bytes [offset, offset + n) of the tensor (Error(InvalidArgument) past its end).
  void read_tensor(const TensorInfo& info, void* dst, size_t offset, size_t n) const;
  // Address of a tensor's bytes, mapped when the file was opened metadata_only (that tensor's pages
  // only, read on demand, kept until the File closes; Error(Io) when the mapping fails), else
  // tensor_data(). A part-read (a pipeline stage's token embeddings, of which a prompt reads a few
  // rows) costs memory only for the pages it touches.
  const std::byte* map_tensor(const TensorInfo& info) const;
  // Drops the whole pages of [p, p + n) from memory once they are copied elsewhere (a mapped file
  // reads them again on access); nothing for a file read into memory or bytes given to parse.
  void release_pages(const std::byte* p, size_t n) const noexcept;

 private:
  explicit File(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Writer {
 public:
  Writer();
  ~Writer();
  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;

  void set(std::string key, Value value);  // replaces an existing key (keeping its place)
  // Copies the bytes (row-major ggml image of the tensor). Error(InvalidArgument) on a bad name
  // (empty, 64+ bytes, duplicate), shape or byte count.
  void add_tensor(std::string name, DType type, std::span<const int64_t> ne, const void* data, size_t nbytes);
  // The same for any ggml type id (e.g. to copy tensors Tessera cannot compute with).
  void add_tensor_raw(std::string name, uint32_t type_id, std::span<const int64_t> ne, const void* data,
                      size_t nbytes);
  // A tensor whose bytes are produced while the file is written (in file order, into a buffer of
  // exactly the type's byte size), so that a large file streams through one tensor's memory. An
  // Error thrown by `produce` fails the write (leaving no file). to_bytes() produces it too.
  using Producer = std::function<void(std::span<std::byte>)>;
  void add_tensor_deferred(std::string name, uint32_t type_id, std::span<const int64_t> ne, Producer produce);
  void set_alignment(uint32_t alignment);  // a power of two; also written as general.alignment
  // Writes version 3 to path.tmp, then renames: a failure never leaves a half-written target.
  void write(const std::string& path) const;
  std::vector<std::byte> to_bytes() const;
  struct Impl;  // opaque outside the library

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::gguf
