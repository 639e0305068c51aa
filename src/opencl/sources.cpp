// Kernel program sources, embedded at build time from kernels/*.cl (see opencl.cmake).
#include "core/check.h"
#include "opencl/kernels/common.cl.h"
#include "opencl/kernels/copy.cl.h"
#include "opencl/kernels/get_rows.cl.h"
#include "opencl/runtime.h"

namespace tessera::opencl {

std::string program_source(std::string_view name) {
  std::string_view body;
  if (name == "copy")
    body = kernels::copy;
  else if (name == "get_rows")
    body = kernels::get_rows;
  else
    raise(ErrorCode::InvalidArgument, "OpenCL: no kernel program named '{}'", name);
  return fmt::format("#line 1 \"common.cl\"\n{}\n#line 1 \"{}.cl\"\n{}", kernels::common, name, body);
}

}  // namespace tessera::opencl
