// GGUF writer: version 3, KVs in insertion order, tensor data aligned and padded exactly as ggml lays
// it out, written to a temporary file that is renamed over the target only once complete.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "core/check.h"
#include "core/file_io.h"
#include "core/gguf_internal.h"

namespace tessera::gguf {

struct Writer::Impl {
  struct PendingTensor {
    std::string name;
    uint32_t type_id;
    int n_dims;
    std::array<int64_t, 4> ne;
    std::vector<std::byte> data;
    size_t nbytes = 0;
    Producer produce;  // set for a deferred tensor (data stays empty)
  };
  std::vector<std::pair<std::string, Value>> kvs;
  std::vector<PendingTensor> tensors;
  std::set<std::string, std::less<>> names;

  size_t alignment() const {
    for (const auto& [k, v] : kvs)
      if (k == "general.alignment") return std::get<uint32_t>(v);
    return kDefaultAlignment;
  }
};

namespace {

// Numbers alternatives of ArrayValue in GGUF id order (String and Array left out).
int32_t array_numbers_type(const ArrayValue& a) {
  const auto i = static_cast<int32_t>(a.numbers.index());
  return i < 8 ? i : i + 2;
}

void check_value(const std::string& key, const Value& v) {
  if (key.empty()) raise(ErrorCode::InvalidArgument, "gguf::Writer: a key must not be empty");
  if (const auto* a = std::get_if<ArrayValue>(&v)) {
    const auto t = static_cast<int32_t>(a->type);
    if (a->type == ValueType::Array)
      raise(ErrorCode::InvalidArgument, "gguf::Writer: key '{}': arrays of arrays are not allowed", key);
    if (t < 0 || t > static_cast<int32_t>(ValueType::F64))
      raise(ErrorCode::InvalidArgument, "gguf::Writer: key '{}': unknown array element type {}", key, t);
    if (a->type != ValueType::String && array_numbers_type(*a) != t)
      raise(ErrorCode::InvalidArgument, "gguf::Writer: key '{}': array says {} but holds {} numbers", key,
            type_name(a->type), type_name(static_cast<ValueType>(array_numbers_type(*a))));
  }
  if (key == "general.alignment") {
    const auto* a = std::get_if<uint32_t>(&v);
    if (a == nullptr || !std::has_single_bit(*a))
      raise(ErrorCode::InvalidArgument, "gguf::Writer: general.alignment must be a u32 power of two");
  }
}

struct Sink {
  virtual ~Sink() = default;
  virtual void write(const void* p, size_t n) = 0;
};

// Streams the file image into a sink.
class Emitter {
 public:
  explicit Emitter(Sink& sink) : sink_(sink) {}
  size_t pos() const { return pos_; }
  void skip(size_t n) { pos_ += n; }  // measuring only: n bytes that are not written
  void bytes(const void* p, size_t n) {
    if (n != 0) sink_.write(p, n);
    pos_ += n;
  }
  template <typename T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(size_t alignment) {
    static constexpr std::byte kZeros[256] = {};
    size_t n = align_up(pos_, alignment) - pos_;
    while (n > 0) {
      const size_t k = std::min(n, sizeof kZeros);
      bytes(kZeros, k);
      n -= k;
    }
  }
  void value(const Value& v) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            string(x);
          } else if constexpr (std::is_same_v<T, ArrayValue>) {
            put<int32_t>(static_cast<int32_t>(x.type));
            put<uint64_t>(x.size());
            if (x.type == ValueType::String) {
              for (const auto& s : x.strings) string(s);
            } else {
              std::visit(
                  [&](const auto& vec) {
                    using E = typename std::decay_t<decltype(vec)>::value_type;
                    if constexpr (std::is_same_v<E, bool>) {
                      for (bool b : vec) put<uint8_t>(b ? 1 : 0);
                    } else {
                      bytes(vec.data(), vec.size() * sizeof(E));
                    }
                  },
                  x.numbers);
            }
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(x ? 1 : 0);
          } else {
            put<T>(x);
          }
        },
        v);
  }

 private:
  Sink& sink_;
  size_t pos_ = 0;
};

// measure_only: count the bytes without producing deferred tensors.
void emit(const Writer::Impl& w, Sink& sink, bool measure_only = false) {
  Emitter e(sink);
  const size_t alignment = w.alignment();
  e.bytes("GGUF", 4);
  e.put<uint32_t>(3);
  e.put<int64_t>(static_cast<int64_t>(w.tensors.size()));
  e.put<int64_t>(static_cast<int64_t>(w.kvs.size()));
  for (const auto& [key, v] : w.kvs) {
    e.string(key);
    e.put<int32_t>(static_cast<int32_t>(value_type(v)));
    e.value(v);
  }
  size_t offset = 0;
  for (const auto& t : w.tensors) {
    e.string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.n_dims));
    for (int d = 0; d < t.n_dims; ++d) e.put<int64_t>(t.ne[static_cast<size_t>(d)]);
    e.put<int32_t>(static_cast<int32_t>(t.type_id));
    e.put<uint64_t>(offset);
    offset = align_up(offset + t.nbytes, alignment);
  }
  // A file without tensors ends after its infos (as llama.cpp's vocabulary files do).
  if (!w.tensors.empty()) e.pad_to(alignment);
  std::vector<std::byte> produced;
  for (const auto& t : w.tensors) {
    if (!t.produce) {
      e.bytes(t.data.data(), t.data.size());
    } else if (measure_only) {
      e.skip(t.nbytes);
    } else {
      produced.resize(t.nbytes);
      t.produce(std::span<std::byte>(produced));
      e.bytes(produced.data(), produced.size());
    }
    e.pad_to(alignment);
  }
}

struct CountingSink final : Sink {
  size_t n = 0;
  void write(const void*, size_t k) override { n += k; }
};

struct VectorSink final : Sink {
  explicit VectorSink(std::vector<std::byte>& o) : out(o) {}
  std::vector<std::byte>& out;
  void write(const void* p, size_t k) override {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + k);
  }
};

struct FunctionSink final : Sink {
  explicit FunctionSink(file_io::ByteWriter w) : write_bytes(w) {}
  file_io::ByteWriter write_bytes;
  void write(const void* p, size_t k) override { write_bytes(p, k); }
};

}  // namespace

Writer::Writer() : impl_(std::make_unique<Impl>()) {}
Writer::~Writer() = default;
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;

void Writer::set(std::string key, Value value) {
  check_value(key, value);
  for (auto& [k, v] : impl_->kvs)
    if (k == key) {
      v = std::move(value);
      return;
    }
  impl_->kvs.emplace_back(std::move(key), std::move(value));
}

void Writer::set_alignment(uint32_t alignment) { set("general.alignment", alignment); }

void Writer::add_tensor(std::string name, DType type, std::span<const int64_t> ne, const void* data,
                        size_t nbytes) {
  add_tensor_raw(std::move(name), traits(type).gguf_id, ne, data, nbytes);
}

namespace {

// Checks a tensor's name, shape and type against the writer's rules; the descriptor with its byte size.
Writer::Impl::PendingTensor describe(const Writer::Impl& w, const std::string& name, uint32_t type_id,
                                     std::span<const int64_t> ne) {
  const GgmlType* g = ggml_type(type_id);
  if (g == nullptr)
    raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor '{}': unknown type {}", name, type_id);
  if (name.size() > kMaxNameBytes)
    raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor name '{}' is {} bytes; the limit is {}", name,
          name.size(), kMaxNameBytes);
  if (w.names.contains(name))
    raise(ErrorCode::InvalidArgument, "gguf::Writer: duplicate tensor name '{}'", name);
  if (ne.empty() || ne.size() > 4)
    raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor '{}': {} dims given, 1 to 4 allowed", name,
          ne.size());
  Writer::Impl::PendingTensor t{name, type_id, 1, {1, 1, 1, 1}, {}, 0, {}};
  // The reader's bound: the element count, with empty dims counted as 1, fits in int64.
  int64_t elements = 1, bound = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0)
      raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor '{}': ne[{}] = {}", name, d, ne[d]);
    const int64_t m = std::max<int64_t>(ne[d], 1);
    if (bound > std::numeric_limits<int64_t>::max() / m)
      raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor '{}': the element count overflows", name);
    bound *= m;
    elements *= ne[d];
    t.ne[d] = ne[d];
  }
  if (bound / g->block_size > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(g->block_bytes))
    raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor '{}': the byte size overflows", name);
  if (t.ne[0] % g->block_size != 0)
    raise(ErrorCode::InvalidArgument,
          "gguf::Writer: tensor '{}': ne[0] = {} is not a multiple of {}'s block {}", name, t.ne[0], g->name,
          g->block_size);
  // GGUF drops trailing dims of size 1 (at least one dim stays).
  for (int d = 3; d >= 1; --d)
    if (t.ne[static_cast<size_t>(d)] != 1) {
      t.n_dims = d + 1;
      break;
    }
  t.nbytes = static_cast<size_t>(elements / g->block_size) * g->block_bytes;
  return t;
}

}  // namespace

void Writer::add_tensor_raw(std::string name, uint32_t type_id, std::span<const int64_t> ne, const void* data,
                            size_t nbytes) {
  Impl::PendingTensor t = describe(*impl_, name, type_id, ne);
  const GgmlType* g = ggml_type(type_id);
  const size_t expected = t.nbytes;
  if (nbytes != expected)
    raise(ErrorCode::InvalidArgument,
          "gguf::Writer: tensor '{}' ({} [{}, {}, {}, {}]) needs {} bytes, {} given", name, g->name, t.ne[0],
          t.ne[1], t.ne[2], t.ne[3], expected, nbytes);
  if (nbytes != 0 && data == nullptr)
    raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor '{}' has no data", name);
  const auto* b = static_cast<const std::byte*>(data);
  t.data.assign(b, b + nbytes);
  impl_->names.insert(name);
  impl_->tensors.push_back(std::move(t));
}

void Writer::add_tensor_deferred(std::string name, uint32_t type_id, std::span<const int64_t> ne,
                                 Producer produce) {
  Impl::PendingTensor t = describe(*impl_, name, type_id, ne);
  if (!produce) raise(ErrorCode::InvalidArgument, "gguf::Writer: tensor '{}' has no producer", name);
  t.produce = std::move(produce);
  impl_->names.insert(name);
  impl_->tensors.push_back(std::move(t));
}

std::vector<std::byte> Writer::to_bytes() const {
  CountingSink count;
  emit(*impl_, count, /*measure_only=*/true);
  std::vector<std::byte> out;
  out.reserve(count.n);
  VectorSink sink{out};
  emit(*impl_, sink);
  return out;
}

void Writer::write(const std::string& path) const {
  file_io::write_atomically(path, [&](file_io::ByteWriter write) {
    FunctionSink sink(write);
    emit(*impl_, sink);
  });
}

}  // namespace tessera::gguf
