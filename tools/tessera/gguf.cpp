// `tessera gguf FILE`: dumps a GGUF file's header, key/value pairs and tensor infos (like gguf-dump),
// as text or as one JSON document; `--load DEVICE` also loads every tensor onto a device and checks
// that reading it back gives the file's bytes.
#include "tessera/gguf.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "tessera/device.h"
#include "tessera/error.h"
#include "tessera/gguf_loader.h"

namespace tessera::cli {
namespace {

using gguf::ArrayValue;
using gguf::Value;
using gguf::ValueType;

constexpr size_t kShownElements = 8;  // array elements shown unless --full
constexpr size_t kShownBytes = 160;   // string bytes shown in text mode unless --full

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) {
    n = 2;
    cp = b & 0x1Fu;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
    cp = b & 0x0Fu;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
    cp = b & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3Fu);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// A quoted string. JSON: valid JSON with invalid UTF-8 replaced by U+FFFD; text: C-style escapes.
std::string quote(std::string_view s, bool json, size_t limit = std::string_view::npos) {
  std::string out = "\"";
  size_t i = 0;
  for (; i < s.size() && i < limit;) {
    const char c = s[i];
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += json ? std::string("\\ufffd") : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
          out += json ? fmt::format("\\u{:04x}", static_cast<unsigned char>(c))
                      : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else
          out += c;
    }
    ++i;
  }
  out += '"';
  if (i < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

template <typename T>
std::string number(T v, bool json) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return json ? "\"nan\"" : "nan";
    if (std::isinf(v)) return json ? (v > 0 ? "\"inf\"" : "\"-inf\"") : (v > 0 ? "inf" : "-inf");
    return fmt::format("{}", v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    return fmt::format("{}", +v);  // + shows 8-bit values as numbers
  }
}

// The elements of an array (the first `limit` of them), comma separated.
std::string array_elements(const ArrayValue& a, bool json, size_t limit) {
  std::string out;
  const size_t n = std::min(a.size(), limit);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    if (a.type == ValueType::String)
      out += quote(a.strings[i], json, json ? std::string_view::npos : kShownBytes);
    else
      out += std::visit(
          [&](const auto& vec) {
            using E = typename std::decay_t<decltype(vec)>::value_type;
            return number(static_cast<E>(vec[i]), json);
          },
          a.numbers);
  }
  return out;
}

std::string scalar(const Value& v, bool json, bool full) {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>)
          return quote(x, json, json || full ? std::string_view::npos : kShownBytes);
        else if constexpr (std::is_same_v<T, ArrayValue>)
          return {};
        else
          return number(x, json);
      },
      v);
}

std::string type_label(const Value& v) {
  if (const auto* a = std::get_if<ArrayValue>(&v)) return fmt::format("[{}]", gguf::type_name(a->type));
  return std::string(gguf::type_name(gguf::value_type(v)));
}

std::string type_label(const gguf::TensorInfo& t) { return t.type_name(); }

std::string shape(const gguf::TensorInfo& t) {
  std::string out = "[";
  for (int d = 0; d < t.n_dims; ++d)
    out += fmt::format("{}{}", d > 0 ? ", " : "", t.ne[static_cast<size_t>(d)]);
  return out + "]";
}

void print_text(const gguf::File& f, bool full) {
  fmt::print("GGUF v{}: {} ({} bytes)\n", f.version(), f.source(), f.file_size());
  fmt::print("  alignment {}, data section at byte {}\n", f.alignment(), f.data_offset());
  fmt::print("\n{} key/value pairs:\n", f.kvs().size());
  size_t i = 0;
  for (const auto& [key, v] : f.kvs()) {
    ++i;
    std::string shown;
    if (const auto* a = std::get_if<ArrayValue>(&v)) {
      const size_t limit = full ? a->size() : kShownElements;
      shown = "[" + array_elements(*a, false, limit);
      if (a->size() > limit) shown += ", ...";
      shown += fmt::format("] ({} items)", a->size());
    } else {
      shown = scalar(v, false, full);
    }
    fmt::print("  {:>5}  {:<9} {} = {}\n", i, type_label(v), key, shown);
  }
  fmt::print("\n{} tensors:\n", f.tensors().size());
  if (f.tensors().empty()) return;
  size_t width = 4;
  for (const auto& t : f.tensors()) width = std::max(width, t.name.size());
  fmt::print("  {:>5}  {:<{}}  {:<8}  {:<24}  {:>12}  {:>12}\n", "#", "name", width, "type", "shape",
             "offset", "bytes");
  i = 0;
  size_t total = 0;
  for (const auto& t : f.tensors()) {
    fmt::print("  {:>5}  {:<{}}  {:<8}  {:<24}  {:>12}  {:>12}\n", ++i, t.name, width, type_label(t),
               shape(t), t.offset, t.nbytes);
    total += t.nbytes;
  }
  fmt::print("  total {} bytes of tensor data\n", total);
}

void print_json(const gguf::File& f, bool full) {
  std::string out = "{\n";
  out += fmt::format("  \"file\": {},\n  \"version\": {},\n  \"file_size\": {},\n  \"alignment\": {},\n",
                     quote(f.source(), true), f.version(), f.file_size(), f.alignment());
  out += fmt::format("  \"data_offset\": {},\n  \"kv_count\": {},\n  \"tensor_count\": {},\n",
                     f.data_offset(), f.kvs().size(), f.tensors().size());
  out += "  \"kvs\": [";
  bool first = true;
  for (const auto& [key, v] : f.kvs()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += fmt::format("    {{\"key\": {}, ", quote(key, true));
    if (const auto* a = std::get_if<ArrayValue>(&v)) {
      const size_t limit = full ? a->size() : kShownElements;
      out += fmt::format("\"type\": \"array\", \"element_type\": \"{}\", \"length\": {}, \"truncated\": {}, ",
                         gguf::type_name(a->type), a->size(), a->size() > limit);
      out += "\"value\": [" + array_elements(*a, true, limit) + "]}";
    } else {
      out += fmt::format("\"type\": \"{}\", \"value\": {}}}", type_label(v), scalar(v, true, full));
    }
  }
  out += first ? "],\n" : "\n  ],\n";
  out += "  \"tensors\": [";
  first = true;
  for (const auto& t : f.tensors()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += fmt::format(
        "    {{\"name\": {}, \"type\": \"{}\", \"type_id\": {}, \"shape\": {}, \"offset\": {}, "
        "\"file_offset\": {}, "
        "\"bytes\": {}}}",
        quote(t.name, true), type_label(t), t.type_id, shape(t), t.offset, f.data_offset() + t.offset,
        t.nbytes);
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  std::fputs(out.c_str(), stdout);
}

// A progress bar on stderr, only on a terminal and only once loading has taken more than a moment.
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}
  void update(size_t done, size_t total) {
    if (!tty_ || total == 0) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 0.5 && !shown_) return;
    shown_ = true;
    const double frac = static_cast<double>(done) / static_cast<double>(total);
    const int width = 40, filled = static_cast<int>(frac * width);
    std::fprintf(stderr, "\rloading [%s%s] %3d%% %.1f/%.1f MiB",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), static_cast<int>(frac * 100),
                 static_cast<double>(done) / (1 << 20), static_cast<double>(total) / (1 << 20));
    std::fflush(stderr);
  }
  ~ProgressBar() {
    if (shown_) std::fputc('\n', stderr);
  }

 private:
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

void load(const gguf::File& f, const std::string& device_name, bool json) {
  Device& device = Registry::instance().get(device_name);
  Context ctx;
  const auto start = std::chrono::steady_clock::now();
  gguf::LoadedTensors loaded;
  {
    ProgressBar bar;
    loaded = gguf::load_tensors(f, ctx, device.buffer_type(),
                                [&](size_t done, size_t total) { bar.update(done, total); });
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Read every tensor back through its buffer: the device's layout must give back the file's bytes.
  std::vector<std::byte> back;
  size_t total = 0;
  for (const auto& info : f.tensors()) {
    const Tensor& t = *loaded.tensors.at(info.name);
    back.resize(info.nbytes);
    tensor_get(t, back.data(), 0, info.nbytes);
    if (info.nbytes != 0 && std::memcmp(back.data(), f.tensor_data(info), info.nbytes) != 0)
      throw Error(ErrorCode::DeviceError, fmt::format("{}: tensor '{}' reads back different bytes from {}",
                                                      f.source(), info.name, device.name()));
    total += info.nbytes;
  }
  const auto message = fmt::format(
      "loaded {} tensors ({:.2f} MiB) into {} in {:.3f} s{}; read back identical", f.tensors().size(),
      static_cast<double>(total) / (1 << 20), device.name(), seconds, loaded.zero_copy ? " (zero copy)" : "");
  std::fprintf(json ? stderr : stdout, "\n%s\n", message.c_str());
}

}  // namespace

void add_gguf(CLI::App& app) {
  auto* cmd = app.add_subcommand("gguf", "Dump a GGUF file: header, key/value pairs and tensors");
  static std::string path, device;
  static bool json = false, full = false;
  cmd->add_option("file", path, "GGUF file")->required();
  cmd->add_flag("--json", json, "Print one JSON document");
  cmd->add_flag("--full", full, "Print arrays and strings in full");
  cmd->add_option("--load", device, "Also load every tensor onto DEVICE (e.g. CPU) and verify it");
  cmd->callback([] {
    const gguf::File f = gguf::File::open(path);
    if (json)
      print_json(f, full);
    else
      print_text(f, full);
    if (!device.empty()) load(f, device, json);
  });
}

}  // namespace tessera::cli
