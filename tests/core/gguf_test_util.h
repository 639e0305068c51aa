#pragma once
// Helpers for the GGUF tests: a byte builder that crafts files by hand (independent of the Writer),
// temporary paths, running the CLI, and saving every crafted file as a fuzzing seed.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::gguf::testing {

// Little-endian bytes, appended field by field.
class Bytes {
 public:
  size_t size() const { return data.size(); }
  Bytes& raw(std::string_view s) {
    for (char c : s) data.push_back(static_cast<std::byte>(c));
    return *this;
  }
  template <typename T>
  Bytes& put(T v) {
    std::byte b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    data.insert(data.end(), b, b + sizeof b);
    return *this;
  }
  Bytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    return raw(s);
  }
  Bytes& zeros(size_t n) {
    data.insert(data.end(), n, std::byte{0});
    return *this;
  }
  Bytes& pad_to(size_t alignment) { return zeros((alignment - size() % alignment) % alignment); }
  Bytes& header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
    raw("GGUF");
    put<uint32_t>(version);
    put<int64_t>(n_tensors);
    return put<int64_t>(n_kv);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) {
    str(key);
    put<int32_t>(4);
    return put<uint32_t>(v);
  }
  Bytes& kv_string(std::string_view key, std::string_view v) {
    str(key);
    put<int32_t>(8);
    return str(v);
  }
  Bytes& tensor_info(std::string_view name, std::vector<int64_t> ne, int32_t type, uint64_t offset) {
    str(name);
    put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (int64_t n : ne) put<int64_t>(n);
    put<int32_t>(type);
    return put<uint64_t>(offset);
  }
  std::span<const std::byte> span() const { return data; }

  std::vector<std::byte> data;
};

inline std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("tessera_gguf_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// With TESSERA_GGUF_CORPUS set (scripts/fuzz.sh sets it), every file a test crafts or writes becomes a
// seed for the fuzzer: the corpus is generated, never committed.
inline void save_seed(std::string_view name, std::span<const std::byte> bytes) {
  const char* dir = std::getenv("TESSERA_GGUF_CORPUS");
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::create_directories(dir);
  write_file(std::filesystem::path(dir) / (std::string(name) + ".gguf"), bytes);
}

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built `tessera` program with arguments (already shell-quoted where needed).
inline CliResult run_cli(const std::string& args) {
  const auto dir = temp_dir();
  const auto out_path = dir / "cli_stdout.txt", err_path = dir / "cli_stderr.txt";
  const std::string cmd = std::string("'") + TESSERA_CLI + "' " + args + " >'" + out_path.string() + "' 2>'" +
                          err_path.string() + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::filesystem::path& p) {
    const auto b = read_file(p);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace tessera::gguf::testing
