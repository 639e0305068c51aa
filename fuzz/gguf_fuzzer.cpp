// libFuzzer target for the GGUF reader. Any input must either parse or throw tessera::Error; a file
// that parses is then taken through every getter, both load paths and a Writer round trip, which
// must reproduce it (a reader/writer disagreement traps, so the fuzzer reports it as a crash).
#include <cstdio>
#include <cstring>
#include <map>
#include <span>

#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/gguf_loader.h"

namespace {

using namespace tessera;
using namespace tessera::gguf;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "gguf_fuzzer: %s: %s\n", what, detail.c_str());
  __builtin_trap();
}

// A non-host buffer type with its own memory, to drive the chunked Buffer::set path.
class CopyType final : public BufferType {
 public:
  std::string name() const override { return "FuzzCopy"; }
  std::unique_ptr<Buffer> allocate(size_t size) override;
  size_t alignment() const override { return 64; }
  bool is_host() const override { return false; }
};

class CopyBuffer final : public Buffer {
 public:
  CopyBuffer(BufferType& type, size_t size) : Buffer(type, size), memory_(size) {}
  void* base() const override { return const_cast<std::byte*>(memory_.data()); }
  void set(Tensor& t, const void* src, size_t offset, size_t size) override {
    std::memcpy(static_cast<std::byte*>(t.data) + offset, src, size);
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    std::memcpy(dst, static_cast<const std::byte*>(t.data) + offset, size);
  }
  void clear(uint8_t v) override { std::memset(memory_.data(), v, memory_.size()); }

 private:
  std::vector<std::byte> memory_;
};

std::unique_ptr<Buffer> CopyType::allocate(size_t size) { return std::make_unique<CopyBuffer>(*this, size); }

template <typename Fn>
void tolerate(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
  }
}

void exercise_getters(const File& f) {
  for (const auto& kv : f.kvs()) {
    const std::string& key = kv.first;  // a named reference: lambdas cannot capture structured bindings
    if (f.find(key) != &kv.second) bug("find", key);
    tolerate([&] { (void)f.get_u32(key); });
    tolerate([&] { (void)f.get_i32(key); });
    tolerate([&] { (void)f.get_u64(key); });
    tolerate([&] { (void)f.get_f32(key); });
    tolerate([&] { (void)f.get_bool(key); });
    tolerate([&] { (void)f.get_string(key); });
    tolerate([&] { (void)f.get_array(key); });
    tolerate([&] { (void)f.get_string_array(key); });
    tolerate([&] { (void)f.get_f32_array(key); });
    tolerate([&] { (void)f.get_i32_array(key); });
    tolerate([&] { (void)f.get_int(key); });
  }
  tolerate([&] { (void)f.get("no such key"); });
}

uint64_t checksum(const std::byte* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 1099511628211ull;
  return h;
}

void exercise_tensors(const File& f) {
  std::map<std::string, uint64_t> sums;
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) bug("find_tensor", t.name);
    sums[t.name] = checksum(f.tensor_data(t), t.nbytes);  // ASan checks every byte is inside the input
    tolerate([&] { (void)t.descriptor(); });
  }
  for (BufferType* type : {&host_buffer_type(), static_cast<BufferType*>(nullptr)}) {
    CopyType copy;
    BufferType& bt = type != nullptr ? *type : copy;
    try {
      Context ctx;
      size_t last = 0;
      auto loaded = load_tensors(
          f, ctx, bt,
          [&](size_t done, size_t total) {
            if (done < last || done > total) bug("progress", std::to_string(done));
            last = done;
          },
          96);
      for (const auto& [name, t] : loaded.tensors) {
        std::vector<std::byte> back(t->nbytes());
        tensor_get(*t, back.data(), 0, back.size());
        if (checksum(back.data(), back.size()) != sums.at(name)) bug("load", name);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Unsupported) bug("load_tensors", e.what());
    }
  }
}

void round_trip(const File& f) {
  std::vector<std::byte> bytes;
  try {
    Writer w;
    for (const auto& [key, v] : f.kvs()) w.set(key, v);
    for (const auto& t : f.tensors()) {
      const size_t dims = t.n_dims == 0 ? 1 : static_cast<size_t>(t.n_dims);
      w.add_tensor_raw(t.name, t.type_id, std::span<const int64_t>(t.ne.data(), dims), f.tensor_data(t),
                       t.nbytes);
    }
    bytes = w.to_bytes();
  } catch (const Error& e) {
    bug("the writer refused what the reader accepted", e.what());
  }
  try {
    const File g = File::parse(bytes, "rewritten");
    if (g.kvs().size() != f.kvs().size() || g.tensors().size() != f.tensors().size())
      bug("round trip", "counts");
    for (size_t i = 0; i < f.kvs().size(); ++i)
      if (g.kvs()[i].first != f.kvs()[i].first || !same_value(g.kvs()[i].second, f.kvs()[i].second))
        bug("round trip", f.kvs()[i].first);
    for (size_t i = 0; i < f.tensors().size(); ++i) {
      const auto &a = f.tensors()[i], &b = g.tensors()[i];
      if (a.name != b.name || a.type_id != b.type_id || a.ne != b.ne || a.nbytes != b.nbytes ||
          (a.nbytes != 0 && std::memcmp(f.tensor_data(a), g.tensor_data(b), a.nbytes) != 0))
        bug("round trip", a.name);
    }
  } catch (const Error& e) {
    bug("the reader refused what the writer wrote", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::optional<File> file;
  try {
    file.emplace(File::parse(bytes, "fuzz"));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::CorruptFile) bug("parse threw a non-CorruptFile error", e.what());
    return 0;
  }
  exercise_getters(*file);
  exercise_tensors(*file);
  round_trip(*file);
  return 0;
}
