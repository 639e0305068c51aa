// Program building with an on-disk binary cache: a program is compiled from its embedded source
// once per device and driver; later processes load the binary (clCreateProgramWithBinary).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/check.h"
#include "core/file_io.h"
#include "opencl/runtime.h"
#include "tessera/log.h"

namespace tessera::opencl {
namespace {

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t n = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n > 0) clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The binary of `program` for `device` (a program may be associated with several devices).
std::vector<unsigned char> program_binary(cl_program program, cl_device_id device) {
  cl_uint n = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_NUM_DEVICES, sizeof n, &n, nullptr) != CL_SUCCESS || n == 0)
    return {};
  std::vector<cl_device_id> devices(n);
  std::vector<size_t> sizes(n);
  clGetProgramInfo(program, CL_PROGRAM_DEVICES, n * sizeof(cl_device_id), devices.data(), nullptr);
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, n * sizeof(size_t), sizes.data(), nullptr) !=
      CL_SUCCESS)
    return {};
  std::vector<std::vector<unsigned char>> binaries(n);
  std::vector<unsigned char*> pointers(n);
  for (cl_uint i = 0; i < n; ++i) {
    binaries[i].resize(sizes[i]);
    pointers[i] = sizes[i] > 0 ? binaries[i].data() : nullptr;
  }
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, n * sizeof(unsigned char*), pointers.data(), nullptr) !=
      CL_SUCCESS)
    return {};
  for (cl_uint i = 0; i < n; ++i)
    if (devices[i] == device) return std::move(binaries[i]);
  return {};
}

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A cache entry, written whole or not at all (a failure only costs the next process a compile).
void store(const std::string& path, const std::vector<unsigned char>& data) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  try {
    file_io::write_atomically(path, [&](file_io::ByteWriter write) { write(data.data(), data.size()); });
  } catch (const Error& e) {
    log(LogLevel::Info, fmt::format("OpenCL: program cache not written: {}", e.what()));
  }
}

}  // namespace

std::string OpenClRuntime::cache_path(const Device& d, std::string_view name,
                                      const std::string& source) const {
  if (options_.cache_dir.empty()) return {};
  const uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull, d.cache_key), source);
  return fmt::format("{}/{}-{:016x}.bin", options_.cache_dir, name, h);
}

cl_program OpenClRuntime::program(int device, std::string_view name) {
  Device& d = dev(device);
  std::lock_guard lock(d.program_mutex);
  if (auto it = d.programs.find(std::string(name)); it != d.programs.end()) return it->second;
  cl_program p = build_program(d, name, program_source(name));
  d.programs.emplace(std::string(name), p);
  return p;
}

cl_program OpenClRuntime::build_program(Device& d, std::string_view name, const std::string& source) {
  const std::string path = cache_path(d, name, source);
  const std::string where = fmt::format("{} ({})", d.props.name, d.props.description);
  if (!path.empty()) {
    const std::vector<unsigned char> binary = read_file(path);
    if (!binary.empty()) {
      const unsigned char* data = binary.data();
      const size_t size = binary.size();
      cl_int status = CL_SUCCESS, err = CL_SUCCESS;
      cl_program p = clCreateProgramWithBinary(d.context, 1, &d.id, &size, &data, &status, &err);
      if (err == CL_SUCCESS && status == CL_SUCCESS &&
          clBuildProgram(p, 1, &d.id, d.build_options.c_str(), nullptr, nullptr) == CL_SUCCESS) {
        ++loaded_;
        return p;
      }
      if (p != nullptr) clReleaseProgram(p);
      log(LogLevel::Info, fmt::format("{}: cached program {} is unusable; rebuilding it", where, path));
      std::remove(path.c_str());
    }
  }
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(d.context, 1, &text, &length, &err);
  check(err, where, "clCreateProgramWithSource", name);
  err = clBuildProgram(p, 1, &d.id, d.build_options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    const std::string log_text = build_log(p, d.id);
    clReleaseProgram(p);
    check(err, where, fmt::format("clBuildProgram({})", name), "build log:\n" + log_text);
  }
  ++compiled_;
  if (!path.empty()) {
    const auto binary = program_binary(p, d.id);
    if (!binary.empty()) store(path, binary);
  }
  return p;
}

}  // namespace tessera::opencl
