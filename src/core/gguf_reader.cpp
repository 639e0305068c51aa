// GGUF reader: maps a file and validates every field before anything trusts it. Counts and lengths are
// checked against the bytes that remain before anything is allocated, so a small hostile file can
// never make the reader allocate or loop in proportion to a number it merely claims.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "core/check.h"
#include "core/file_io.h"
#include "core/gguf_internal.h"

namespace tessera::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

Mapping::~Mapping() {
  if (address == nullptr) return;
  if (mapped)
    munmap(address, size);
  else
    std::free(address);
}

namespace {

constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;      // non-empty key, type, a one-byte value
constexpr uint64_t kMinTensorBytes = 8 + 4 + 4 + 8;  // empty name, n_dims = 0, type, offset
constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

size_t scalar_size(ValueType t) noexcept {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    default:
      return 0;
  }
}

bool is_value_type(int32_t t) noexcept { return t >= 0 && t <= static_cast<int32_t>(ValueType::F64); }

// A bounds-checked cursor. Field names are built by callables, only when an error is reported.
// Thrown when the bytes at hand (a prefix of the file: OpenOptions::metadata_only) end before the
// file does: `end` bytes from the start are needed.
struct NeedMoreBytes {
  size_t end;
};

class Parser {
 public:
  // `size`: the file's size, for every bound; `bytes` may be a prefix of it (NeedMoreBytes).
  Parser(std::span<const std::byte> bytes, const std::string& source, size_t size)
      : data_(bytes.data()), have_(bytes.size()), size_(size), source_(source) {}

  size_t pos() const noexcept { return pos_; }
  size_t size() const noexcept { return size_; }
  size_t remaining() const noexcept { return size_ - pos_; }

  [[noreturn]] void fail(size_t at, std::string_view field, std::string_view what) const {
    raise(ErrorCode::CorruptFile, "{}: byte {}: {}: {}", source_, at, field, what);
  }

  template <typename Field>
  void need(size_t n, const Field& field) const {
    if (n > remaining())
      fail(pos_, field(),
           fmt::format("needs {} bytes but the file ends after {} (truncated at {} bytes)", n, remaining(),
                       size_));
  }

  template <typename T, typename Field>
  T read(const Field& field) {
    need(sizeof(T), field);
    have(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

  template <typename Field>
  std::string read_string(const Field& field, uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
    const size_t at = pos_;
    const auto len = read<uint64_t>(field);
    if (len > max_len) fail(at, field(), fmt::format("{} bytes long; the limit is {}", len, max_len));
    if (len > remaining())
      fail(at, field(),
           fmt::format("string length {} runs past the end of the file ({} bytes remain)", len, remaining()));
    have(static_cast<size_t>(len));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  template <typename T>
  std::vector<T> read_numbers(size_t count) {
    have(count * sizeof(T));  // the caller checked count * sizeof(T) <= remaining()
    std::vector<T> v(count);
    if (count != 0) std::memcpy(v.data(), data_ + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    return v;
  }

  std::vector<bool> read_bools(size_t count) {
    have(count);
    std::vector<bool> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = data_[pos_ + i] != std::byte{0};
    pos_ += count;
    return v;
  }

 private:
  // The next n bytes (within the file) are at hand, or NeedMoreBytes.
  void have(size_t n) const {
    if (n > have_ - pos_) throw NeedMoreBytes{pos_ + n};
  }

  const std::byte* data_;
  size_t have_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& source_;
};

template <typename Field>
ArrayValue read_array(Parser& p, const Field& field) {
  const size_t at = p.pos();
  const auto et = p.read<int32_t>([&] { return field() + " element type"; });
  if (et == static_cast<int32_t>(ValueType::Array)) p.fail(at, field(), "nested arrays are not allowed");
  if (!is_value_type(et)) p.fail(at, field(), fmt::format("unknown array element type {}", et));
  const size_t count_at = p.pos();
  const auto count = p.read<uint64_t>([&] { return field() + " count"; });
  ArrayValue a;
  a.type = static_cast<ValueType>(et);
  if (a.type == ValueType::String) {
    // Every string costs at least its 8-byte length.
    if (count > p.remaining() / 8)
      p.fail(count_at, field(),
             fmt::format("an array of {} strings needs at least {} bytes, but only {} remain", count,
                         count > std::numeric_limits<uint64_t>::max() / 8 ? std::string("2^64")
                                                                          : std::to_string(count * 8),
                         p.remaining()));
    a.strings.reserve(static_cast<size_t>(count));
    for (size_t k = 0; k < count; ++k)
      a.strings.push_back(p.read_string([&] { return fmt::format("{}[{}]", field(), k); }));
    return a;
  }
  const size_t es = scalar_size(a.type);
  if (count > p.remaining() / es)
    p.fail(count_at, field(),
           fmt::format("an array of {} {} values runs past the end of the file ({} bytes remain)", count,
                       type_name(a.type), p.remaining()));
  const auto n = static_cast<size_t>(count);
  switch (a.type) {
    case ValueType::U8:
      a.numbers = p.read_numbers<uint8_t>(n);
      break;
    case ValueType::I8:
      a.numbers = p.read_numbers<int8_t>(n);
      break;
    case ValueType::U16:
      a.numbers = p.read_numbers<uint16_t>(n);
      break;
    case ValueType::I16:
      a.numbers = p.read_numbers<int16_t>(n);
      break;
    case ValueType::U32:
      a.numbers = p.read_numbers<uint32_t>(n);
      break;
    case ValueType::I32:
      a.numbers = p.read_numbers<int32_t>(n);
      break;
    case ValueType::F32:
      a.numbers = p.read_numbers<float>(n);
      break;
    case ValueType::Bool:
      a.numbers = p.read_bools(n);
      break;
    case ValueType::U64:
      a.numbers = p.read_numbers<uint64_t>(n);
      break;
    case ValueType::I64:
      a.numbers = p.read_numbers<int64_t>(n);
      break;
    case ValueType::F64:
      a.numbers = p.read_numbers<double>(n);
      break;
    default:
      TESSERA_ASSERT(false);
  }
  return a;
}

template <typename Field>
Value read_value(Parser& p, ValueType type, const Field& field) {
  switch (type) {
    case ValueType::U8:
      return p.read<uint8_t>(field);
    case ValueType::I8:
      return p.read<int8_t>(field);
    case ValueType::U16:
      return p.read<uint16_t>(field);
    case ValueType::I16:
      return p.read<int16_t>(field);
    case ValueType::U32:
      return p.read<uint32_t>(field);
    case ValueType::I32:
      return p.read<int32_t>(field);
    case ValueType::F32:
      return p.read<float>(field);
    case ValueType::Bool:
      return p.read<uint8_t>(field) != 0;
    case ValueType::String:
      return p.read_string(field);
    case ValueType::Array:
      return read_array(p, field);
    case ValueType::U64:
      return p.read<uint64_t>(field);
    case ValueType::I64:
      return p.read<int64_t>(field);
    case ValueType::F64:
      return p.read<double>(field);
  }
  TESSERA_ASSERT(false);
  return uint8_t{0};
}

void parse_header(Parser& p, File::Impl& f, int64_t& n_tensors, int64_t& n_kv) {
  if (p.size() < 4)
    p.fail(0, "magic", fmt::format("the file is {} bytes, too short for a GGUF header", p.size()));
  const auto magic = p.read<std::array<char, 4>>([] { return std::string("magic"); });
  if (std::string_view(magic.data(), 4) != "GGUF") {
    std::string shown;
    for (char c : magic) shown += fmt::format("{:02x}", static_cast<unsigned char>(c));
    p.fail(0, "magic", fmt::format("expected \"GGUF\" (47475546), found {}: not a GGUF file", shown));
  }
  const auto version = p.read<uint32_t>([] { return std::string("version"); });
  if (version != 0 && (version & 0xFFFFu) == 0)
    p.fail(4, "version",
           fmt::format("{:#010x} is byte-swapped: a big-endian file, which this reader does not support",
                       version));
  if (version != 2 && version != 3)
    p.fail(4, "version", fmt::format("{} is not supported (only GGUF versions 2 and 3 are)", version));
  f.version = version;
  n_tensors = p.read<int64_t>([] { return std::string("n_tensors"); });
  n_kv = p.read<int64_t>([] { return std::string("n_kv"); });
  if (n_tensors < 0) p.fail(8, "n_tensors", fmt::format("{} is negative", n_tensors));
  if (n_kv < 0) p.fail(16, "n_kv", fmt::format("{} is negative", n_kv));
  const uint64_t rem = p.remaining();
  const auto nt = static_cast<uint64_t>(n_tensors), nk = static_cast<uint64_t>(n_kv);
  if (nk > rem / kMinKvBytes)
    p.fail(16, "n_kv",
           fmt::format("{} key/value pairs cannot fit in the {} bytes that follow the header", n_kv, rem));
  if (nt > rem / kMinTensorBytes)
    p.fail(8, "n_tensors",
           fmt::format("{} tensor infos cannot fit in the {} bytes that follow the header", n_tensors, rem));
  if (nk * kMinKvBytes + nt * kMinTensorBytes > rem)
    p.fail(8, "n_tensors",
           fmt::format("{} tensor infos and {} key/value pairs need at least {} bytes, but only {} follow "
                       "the header",
                       n_tensors, n_kv, nk * kMinKvBytes + nt * kMinTensorBytes, rem));
}

void parse_kvs(Parser& p, File::Impl& f, size_t n_kv) {
  f.kvs.reserve(n_kv);
  f.kv_offsets.reserve(n_kv);
  for (size_t i = 0; i < n_kv; ++i) {
    const size_t at = p.pos();
    std::string key = p.read_string([&] { return fmt::format("kv[{}] key", i); });
    if (key.empty()) p.fail(at, fmt::format("kv[{}] key", i), "the key is empty");
    if (auto it = f.kv_index.find(key); it != f.kv_index.end())
      p.fail(at, fmt::format("kv[{}] key \"{}\"", i, key),
             fmt::format("duplicate key (already defined by kv[{}] at byte {})", it->second,
                         f.kv_offsets[it->second]));
    const auto field = [&] { return fmt::format("kv[{}] \"{}\"", i, key); };
    const size_t type_at = p.pos();
    const auto type = p.read<int32_t>([&] { return field() + " type"; });
    if (!is_value_type(type)) p.fail(type_at, field(), fmt::format("unknown value type {}", type));
    Value v = read_value(p, static_cast<ValueType>(type), field);
    f.kv_index.emplace(key, f.kvs.size());
    f.kv_offsets.push_back(at);
    f.kvs.emplace_back(std::move(key), std::move(v));
  }
  if (auto it = f.kv_index.find("general.alignment"); it != f.kv_index.end()) {
    const Value& v = f.kvs[it->second].second;
    const size_t at = f.kv_offsets[it->second];
    const auto field = fmt::format("kv[{}] \"general.alignment\"", it->second);
    if (!std::holds_alternative<uint32_t>(v))
      p.fail(at, field, fmt::format("must be u32, found {}", type_name(value_type(v))));
    const uint32_t a = std::get<uint32_t>(v);
    if (!std::has_single_bit(a)) p.fail(at, field, fmt::format("{} is not a power of two", a));
    f.alignment = a;
  }
}

void parse_tensor_infos(Parser& p, File::Impl& f, size_t n_tensors, std::vector<size_t>& offset_at) {
  f.tensors.reserve(n_tensors);
  offset_at.reserve(n_tensors);
  for (size_t i = 0; i < n_tensors; ++i) {
    TensorInfo info;
    info.info_offset = p.pos();
    info.name = p.read_string([&] { return fmt::format("tensor[{}] name", i); }, kMaxNameBytes);
    if (auto it = f.tensor_index.find(info.name); it != f.tensor_index.end())
      p.fail(info.info_offset, fmt::format("tensor[{}] name \"{}\"", i, info.name),
             fmt::format("duplicate tensor name (already used by tensor[{}] at byte {})", it->second,
                         f.tensors[it->second].info_offset));
    const auto field = [&] { return fmt::format("tensor[{}] \"{}\"", i, info.name); };
    const size_t dims_at = p.pos();
    const auto n_dims = p.read<uint32_t>([&] { return field() + " n_dims"; });
    if (n_dims > 4)
      p.fail(dims_at, field() + " n_dims", fmt::format("{} dimensions; at most 4 are allowed", n_dims));
    info.n_dims = static_cast<int>(n_dims);
    const size_t ne_at = p.pos();
    // Bound the byte size with empty dims counted as 1, so strides derived later never overflow.
    int64_t elements_bound = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t at = p.pos();
      const auto ne = p.read<int64_t>([&] { return fmt::format("{} ne[{}]", field(), d); });
      if (ne < 0) p.fail(at, fmt::format("{} ne[{}]", field(), d), fmt::format("{} is negative", ne));
      const int64_t m = std::max<int64_t>(ne, 1);
      if (elements_bound > kMaxBytes / m)
        p.fail(at, fmt::format("{} ne[{}]", field(), d),
               fmt::format("{} makes the element count overflow 64 bits", ne));
      elements_bound *= m;
      info.ne[d] = ne;
    }
    const size_t type_at = p.pos();
    const auto type_id = p.read<int32_t>([&] { return field() + " type"; });
    const GgmlType* g = type_id < 0 ? nullptr : ggml_type(static_cast<uint32_t>(type_id));
    if (g == nullptr) p.fail(type_at, field() + " type", fmt::format("unknown tensor type {}", type_id));
    if (info.ne[0] % g->block_size != 0)
      p.fail(ne_at, field() + " ne[0]",
             fmt::format("{} is not a multiple of the block size {} of type {}", info.ne[0], g->block_size,
                         g->name));
    // Bytes = blocks * block_bytes; checked with the same empty-dims-as-1 bound.
    const int64_t blocks_bound = elements_bound / g->block_size;
    if (blocks_bound > kMaxBytes / static_cast<int64_t>(g->block_bytes))
      p.fail(ne_at, field() + " ne", "the byte size overflows 64 bits");
    info.type_id = static_cast<uint32_t>(type_id);
    info.type = dtype_from_gguf(info.type_id);
    const int64_t elements = info.ne[0] * info.ne[1] * info.ne[2] * info.ne[3];
    info.nbytes = static_cast<size_t>(elements / g->block_size) * g->block_bytes;
    offset_at.push_back(p.pos());
    info.offset = p.read<uint64_t>([&] { return field() + " offset"; });
    f.tensor_index.emplace(info.name, f.tensors.size());
    f.tensors.push_back(std::move(info));
  }
}

void check_tensor_data(const Parser& p, File::Impl& f, const std::vector<size_t>& offset_at) {
  const size_t size = p.size();
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const TensorInfo& t = f.tensors[i];
    const auto field = fmt::format("tensor[{}] \"{}\" offset", i, t.name);
    if (t.offset % f.alignment != 0)
      p.fail(offset_at[i], field,
             fmt::format("{} is not a multiple of the alignment {}", t.offset, f.alignment));
    const bool fits = f.data_offset <= size && t.offset <= size - f.data_offset &&
                      t.nbytes <= size - f.data_offset - t.offset;
    if (!fits)
      p.fail(offset_at[i], field,
             fmt::format("{} bytes at data offset {} (data section at byte {}) run past the end of the file "
                         "({} bytes)",
                         t.nbytes, t.offset, f.data_offset, size));
  }
  std::vector<size_t> order(f.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return f.tensors[a].offset != f.tensors[b].offset ? f.tensors[a].offset < f.tensors[b].offset : a < b;
  });
  const TensorInfo* prev = nullptr;
  size_t prev_i = 0;
  for (size_t i : order) {
    const TensorInfo& t = f.tensors[i];
    if (t.nbytes == 0) continue;
    if (prev != nullptr && prev->offset + prev->nbytes > t.offset)
      p.fail(offset_at[i], fmt::format("tensor[{}] \"{}\" offset", i, t.name),
             fmt::format("data [{}, {}) overlaps tensor[{}] \"{}\" at [{}, {})", t.offset,
                         t.offset + t.nbytes, prev_i, prev->name, prev->offset, prev->offset + prev->nbytes));
    prev = &t;
    prev_i = i;
  }
}

void parse_into(File::Impl& f) {
  Parser p(f.bytes, f.source, f.file_size);
  int64_t n_tensors = 0, n_kv = 0;
  parse_header(p, f, n_tensors, n_kv);
  TESSERA_ASSERT(p.pos() == kHeaderBytes);
  parse_kvs(p, f, static_cast<size_t>(n_kv));
  std::vector<size_t> offset_at;
  parse_tensor_infos(p, f, static_cast<size_t>(n_tensors), offset_at);
  f.data_offset = align_up(p.pos(), f.alignment);
  check_tensor_data(p, f, offset_at);
}

std::string describe_type(const Value& v) {
  if (const auto* a = std::get_if<ArrayValue>(&v)) return fmt::format("array of {}", type_name(a->type));
  return std::string(type_name(value_type(v)));
}

}  // namespace

File::File(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

File File::open(const std::string& path, const OpenOptions& options) {
  file_io::ReadableFile file = file_io::open_for_reading(path);
  auto impl = std::make_unique<Impl>();
  impl->source = path;
  impl->mapping = std::make_unique<Mapping>();
  const size_t size = file.size;
  impl->file_size = size;
  if (options.metadata_only) {
    // A prefix large enough for the infos: start at 1 MiB, grow as far as the parser asks.
    impl->mapping->mapped = false;
    size_t have = std::min<size_t>(size, size_t{1} << 20);
    for (;;) {
      void* address = std::realloc(impl->mapping->address, std::max<size_t>(have, 1));
      if (address == nullptr)
        raise(ErrorCode::OutOfMemory, "cannot read {}: no memory for its first {} bytes", path, have);
      impl->mapping->address = address;
      impl->mapping->size = have;
      const size_t done = file_io::read_at_start(file, address, have, path);
      if (done < have) raise(ErrorCode::Io, "cannot read {}: it ended at byte {} of {}", path, done, size);
      impl->bytes = std::span(static_cast<const std::byte*>(address), have);
      try {
        parse_into(*impl);
        break;
      } catch (const NeedMoreBytes& more) {
        have = std::min(size, std::max(more.end, 2 * have));
        auto fresh = std::make_unique<Impl>();  // what the failed parse filled in, dropped
        fresh->source = path;
        fresh->mapping = std::move(impl->mapping);
        fresh->file_size = size;
        impl = std::move(fresh);
      }
    }
    impl->file.emplace(std::move(file));
    return File(std::move(impl));
  }
  if (size > 0 && options.mmap) {
    void* address = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
    if (address == MAP_FAILED)
      raise(ErrorCode::Io, "cannot map {} ({} bytes): {}", path, size, std::strerror(errno));
    impl->mapping->address = address;
    impl->mapping->size = size;
  } else if (size > 0) {
    // Page-aligned like a mapping, so tensor data keep the alignment the file gives them.
    constexpr size_t kAlign = 4096;
    void* address = std::aligned_alloc(kAlign, align_up(size, kAlign));
    if (address == nullptr)
      raise(ErrorCode::OutOfMemory, "cannot read {}: no memory for its {:.1f} MiB", path,
            static_cast<double>(size) / (1 << 20));
    impl->mapping->mapped = false;
    impl->mapping->address = address;
    impl->mapping->size = size;
    const size_t done = file_io::read_at_start(file, address, size, path);
    if (done < size) raise(ErrorCode::Io, "cannot read {}: it ended at byte {} of {}", path, done, size);
  }
  if (size > 0) impl->bytes = std::span(static_cast<const std::byte*>(impl->mapping->address), size);
  parse_into(*impl);
  return File(std::move(impl));
}

File File::parse(std::span<const std::byte> bytes, std::string source) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::move(source);
  impl->bytes = bytes;
  impl->file_size = bytes.size();
  parse_into(*impl);
  return File(std::move(impl));
}

uint32_t File::version() const noexcept { return impl_->version; }
size_t File::alignment() const noexcept { return impl_->alignment; }
size_t File::data_offset() const noexcept { return impl_->data_offset; }
size_t File::file_size() const noexcept { return impl_->file_size; }
const std::string& File::source() const noexcept { return impl_->source; }
std::span<const std::byte> File::bytes() const noexcept { return impl_->bytes; }
const std::vector<std::pair<std::string, Value>>& File::kvs() const noexcept { return impl_->kvs; }
const std::vector<size_t>& File::kv_offsets() const noexcept { return impl_->kv_offsets; }
const std::vector<TensorInfo>& File::tensors() const noexcept { return impl_->tensors; }

const Value* File::find(std::string_view key) const noexcept {
  const auto it = impl_->kv_index.find(key);
  return it == impl_->kv_index.end() ? nullptr : &impl_->kvs[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const noexcept {
  const auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

void File::release_pages(const std::byte* p, size_t n) const noexcept {
  // Only a mapping reads dropped pages back from the file; a heap copy would lose them.
  const Mapping* m = impl_->mapping.get();
  if (m == nullptr || !m->mapped || m->address == nullptr || n == 0) return;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto* base = static_cast<const std::byte*>(m->address);
  const size_t begin = align_up(static_cast<size_t>(p - base), page);
  const size_t end = (static_cast<size_t>(p - base) + n) / page * page;
  if (end > begin) madvise(const_cast<std::byte*>(base) + begin, end - begin, MADV_DONTNEED);
}

const std::byte* File::tensor_data(const TensorInfo& info) const noexcept {
  if (impl_->file) return nullptr;
  return impl_->bytes.data() + impl_->data_offset + info.offset;
}

const std::byte* File::map_tensor(const TensorInfo& info) const {
  if (!impl_->file) return tensor_data(info);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t at = impl_->data_offset + static_cast<size_t>(info.offset);
  const size_t begin = at / page * page;
  auto m = std::make_unique<Mapping>();
  m->size = std::max<size_t>(at + info.nbytes - begin, 1);
  void* address =
      mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, impl_->file->fd.get(), static_cast<off_t>(begin));
  if (address == MAP_FAILED)
    raise(ErrorCode::Io, "cannot map tensor {} of {}: {}", info.name, impl_->source, std::strerror(errno));
  m->address = address;
  impl_->tensor_maps.push_back(std::move(m));
  return static_cast<const std::byte*>(address) + (at - begin);
}

void File::read_tensor(const TensorInfo& info, void* dst) const { read_tensor(info, dst, 0, info.nbytes); }

void File::read_tensor(const TensorInfo& info, void* dst, size_t offset, size_t n) const {
  if (offset > info.nbytes || n > info.nbytes - offset)
    raise(ErrorCode::InvalidArgument, "tensor {}: bytes [{}, {}) are past its {} bytes", info.name, offset,
          offset + n, info.nbytes);
  if (!impl_->file) {
    if (n > 0) std::memcpy(dst, tensor_data(info) + offset, n);
    return;
  }
  const size_t at = impl_->data_offset + static_cast<size_t>(info.offset) + offset;
  const size_t done = file_io::read_at(impl_->file->fd, at, dst, n, impl_->source);
  if (done < n)
    raise(ErrorCode::Io,
          "cannot read tensor {} of {}: the file ended at byte {} (it has changed since it was opened)",
          info.name, impl_->source, at + done);
}

const Value& File::get(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) raise(ErrorCode::InvalidArgument, "{}: key '{}' not found", impl_->source, key);
  return *v;
}

namespace {

template <typename T>
const T& get_as(const File& f, std::string_view key, std::string_view expected) {
  const Value& v = f.get(key);
  if (const T* p = std::get_if<T>(&v)) return *p;
  raise(ErrorCode::InvalidArgument, "{}: key '{}' is {}, expected {}", f.source(), key, describe_type(v),
        expected);
}

}  // namespace

uint32_t File::get_u32(std::string_view key) const { return get_as<uint32_t>(*this, key, "u32"); }
int32_t File::get_i32(std::string_view key) const { return get_as<int32_t>(*this, key, "i32"); }
uint64_t File::get_u64(std::string_view key) const { return get_as<uint64_t>(*this, key, "u64"); }
float File::get_f32(std::string_view key) const { return get_as<float>(*this, key, "f32"); }
bool File::get_bool(std::string_view key) const { return get_as<bool>(*this, key, "bool"); }
const std::string& File::get_string(std::string_view key) const {
  return get_as<std::string>(*this, key, "string");
}
const ArrayValue& File::get_array(std::string_view key) const {
  return get_as<ArrayValue>(*this, key, "an array");
}

const std::vector<std::string>& File::get_string_array(std::string_view key) const {
  const ArrayValue& a = get_as<ArrayValue>(*this, key, "array of string");
  if (a.type != ValueType::String)
    raise(ErrorCode::InvalidArgument, "{}: key '{}' is array of {}, expected array of string", source(), key,
          type_name(a.type));
  return a.strings;
}

std::vector<float> File::get_f32_array(std::string_view key) const {
  const ArrayValue& a = get_as<ArrayValue>(*this, key, "array of f32");
  if (const auto* v = std::get_if<std::vector<float>>(&a.numbers); v && a.type == ValueType::F32) return *v;
  if (const auto* v = std::get_if<std::vector<double>>(&a.numbers); v && a.type == ValueType::F64)
    return std::vector<float>(v->begin(), v->end());
  raise(ErrorCode::InvalidArgument, "{}: key '{}' is array of {}, expected array of f32", source(), key,
        type_name(a.type));
}

std::vector<int32_t> File::get_i32_array(std::string_view key) const {
  const ArrayValue& a = get_as<ArrayValue>(*this, key, "array of i32");
  const bool integral = a.type != ValueType::String && a.type != ValueType::F32 && a.type != ValueType::F64 &&
                        a.type != ValueType::Bool;
  if (!integral)
    raise(ErrorCode::InvalidArgument, "{}: key '{}' is array of {}, expected array of i32", source(), key,
          type_name(a.type));
  return std::visit(
      [&](const auto& vec) {
        using T = typename std::decay_t<decltype(vec)>::value_type;
        std::vector<int32_t> out;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          out.reserve(vec.size());
          for (size_t i = 0; i < vec.size(); ++i) {
            const T e = vec[i];
            if (!std::in_range<int32_t>(e))
              raise(ErrorCode::InvalidArgument, "{}: key '{}' element {} = {} does not fit in i32", source(),
                    key, i, e);
            out.push_back(static_cast<int32_t>(e));
          }
        }
        return out;
      },
      a.numbers);
}

int64_t File::get_int(std::string_view key) const {
  const Value& v = get(key);
  return std::visit(
      [&](const auto& x) -> int64_t {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if (!std::in_range<int64_t>(x))
            raise(ErrorCode::InvalidArgument, "{}: key '{}' = {} does not fit in i64", source(), key, x);
          return static_cast<int64_t>(x);
        } else {
          raise(ErrorCode::InvalidArgument, "{}: key '{}' is {}, expected an integer", source(), key,
                describe_type(v));
        }
      },
      v);
}

}  // namespace tessera::gguf
