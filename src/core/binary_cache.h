#pragma once
// Compiled device programs kept on disk between processes (OpenCL program binaries, CUDA CUBINs):
// one file per program and key, written whole or not at all, so a later process loads what an
// earlier one compiled. A cache is best effort: an entry it cannot write only costs the next
// process a compile, and the caller drops an entry it finds unusable.
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class BinaryCache {
 public:
  // dir empty: no cache (path() gives "", load() nothing, store() does nothing).
  explicit BinaryCache(std::string dir) : dir_(std::move(dir)) {}
  // A runtime's cache folder: $<env_override> when set ("off": none), else
  // $XDG_CACHE_HOME/tessera/<runtime>, else ~/.cache/tessera/<runtime>; "" when none is known.
  static std::string default_dir(const char* env_override, std::string_view runtime);
  bool enabled() const noexcept { return !dir_.empty(); }

  // The entry of program `name` for `key` (everything the binary depends on: the source, the device,
  // the compiler and its options), with the file extension `ext` (".bin").
  std::string path(std::string_view name, std::initializer_list<std::string_view> key,
                   std::string_view ext) const;
  // The entry's bytes; empty when there is none (or no cache).
  std::vector<unsigned char> load(const std::string& path) const;
  // Writes the entry (creating the folder); a failure is logged, never thrown.
  void store(const std::string& path, std::span<const unsigned char> bytes) const noexcept;
  // Removes an unusable entry.
  void drop(const std::string& path) const noexcept;

 private:
  std::string dir_;
};

}  // namespace tessera
