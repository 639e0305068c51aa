#pragma once
// Reads an architecture's hyperparameters (`<arch>.<key>` in a GGUF file) with their bounds, so a
// bad value is an Error naming the key before anything is allocated.
#include <cstdint>
#include <string>

#include "tessera/gguf.h"

namespace tessera::llm {

class HparamReader {
 public:
  HparamReader(const gguf::File& file, std::string arch) : file_(&file), prefix_(std::move(arch) + ".") {}
  // A reader of no file: every key is absent (a synthetic model's defaults).
  explicit HparamReader(std::string arch) : prefix_(std::move(arch) + ".") {}

  // The file, nullptr for a reader of no file.
  const gguf::File* file() const noexcept { return file_; }
  bool has(const std::string& key) const { return file_ != nullptr && file_->find(prefix_ + key) != nullptr; }
  // "<arch>.<key>", for messages.
  std::string full(const std::string& key) const { return prefix_ + key; }

  // An integer key in [lo, hi]; absent: a required key is an Error, else `fallback`.
  int64_t required_int(const std::string& key, int64_t lo, int64_t hi) const;
  int64_t int_or(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const;
  // A finite float key in [lo, hi] (an integer value is accepted too); absent: `fallback`.
  float float_or(const std::string& key, float fallback, float lo, float hi) const;
  float required_float(const std::string& key, float lo, float hi) const;
  bool bool_or(const std::string& key, bool fallback) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;

 private:
  int64_t checked(const std::string& key, int64_t v, int64_t lo, int64_t hi) const;

  const gguf::File* file_ = nullptr;
  std::string prefix_;
};

}  // namespace tessera::llm
