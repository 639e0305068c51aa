// Compiled device programs on disk (core/binary_cache.h).
#include "core/binary_cache.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "core/env.h"
#include "core/file_io.h"
#include "tessera/error.h"
#include "tessera/log.h"

namespace tessera {
namespace {

// FNV-1a, 64 bits: a stable name for a key (not a security boundary: the folder is the user's).
uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::string BinaryCache::default_dir(const char* env_override, std::string_view runtime) {
  std::string dir = env_string(env_override).value_or("");
  if (dir.empty()) {
    if (const auto xdg = env_string("XDG_CACHE_HOME"))
      dir = fmt::format("{}/tessera/{}", *xdg, runtime);
    else if (const auto home = env_string("HOME"))
      dir = fmt::format("{}/.cache/tessera/{}", *home, runtime);
  }
  return dir == "off" ? std::string() : dir;
}

std::string BinaryCache::path(std::string_view name, std::initializer_list<std::string_view> key,
                              std::string_view ext) const {
  if (dir_.empty()) return {};
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::string_view part : key) h = fnv1a(fnv1a(h, part), std::string_view("\0", 1));  // parts kept apart
  return fmt::format("{}/{}-{:016x}{}", dir_, name, h, ext);
}

std::vector<unsigned char> BinaryCache::load(const std::string& path) const {
  if (path.empty()) return {};
  try {
    const file_io::ReadableFile file = file_io::open_for_reading(path);
    std::vector<unsigned char> bytes(file.size);
    bytes.resize(file_io::read_at_start(file, bytes.data(), bytes.size(), path));
    return bytes;
  } catch (const Error&) {
    return {};  // no entry (or none that can be read): compiled again
  }
}

void BinaryCache::store(const std::string& path, std::span<const unsigned char> bytes) const noexcept {
  if (path.empty()) return;
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    file_io::write_atomically(path, [&](file_io::ByteWriter write) { write(bytes.data(), bytes.size()); });
  } catch (const std::exception& e) {
    log(LogLevel::Info, fmt::format("program cache: {} not written: {}", path, e.what()));
  }
}

void BinaryCache::drop(const std::string& path) const noexcept {
  if (!path.empty()) std::remove(path.c_str());
}

}  // namespace tessera
