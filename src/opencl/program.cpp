// Program building with an on-disk binary cache: a program is compiled from its embedded source
// once per device and driver; later processes load the binary (clCreateProgramWithBinary).
#include "core/binary_cache.h"
#include "core/check.h"
#include "opencl/runtime.h"
#include "tessera/log.h"

namespace tessera::opencl {
namespace {

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

}  // namespace

cl_program OpenClRuntime::program(int device, std::string_view name) {
  Device& d = dev(device);
  std::lock_guard lock(d.program_mutex);
  if (auto it = d.programs.find(std::string(name)); it != d.programs.end()) return it->second;
  cl_program p = build_program(d, name, program_source(name));
  d.programs.emplace(std::string(name), p);
  return p;
}

cl_program OpenClRuntime::build_program(Device& d, std::string_view name, const std::string& source) {
  const BinaryCache cache(options_.cache_dir);
  const std::string path = cache.path(name, {d.cache_key, source}, ".bin");
  const std::string where = fmt::format("{} ({})", d.props.name, d.props.description);
  if (!path.empty()) {
    const std::vector<unsigned char> binary = cache.load(path);
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
      cache.drop(path);
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
    if (!binary.empty()) cache.store(path, binary);
  }
  return p;
}

}  // namespace tessera::opencl
