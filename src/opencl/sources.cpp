// Kernel program sources, embedded at build time from kernels/*.cl (see opencl.cmake).
#include "core/check.h"
#include "opencl/kernels/all.h"
#include "opencl/runtime.h"

namespace tessera::opencl {

std::string program_source(std::string_view name) {
  // Every program starts with the I-quant codebooks and the shared helpers; #line keeps build logs
  // pointing at the files.
  std::string text = fmt::format("#line 1 \"iq_grids.cl\"\n{}\n#line 1 \"common.cl\"\n{}", kernels::iq_grids,
                                 kernels::common);
  // "a+b+c" is one program built from several kernel files: PoCL pays an LLVM build per program.
  for (size_t start = 0; start <= name.size();) {
    const size_t plus = std::min(name.find('+', start), name.size());
    const std::string_view part = name.substr(start, plus - start);
    std::string_view body;
    for (const auto& [program, source] : kernels::kAll)
      if (program == part && program != "common" && program != "iq_grids") body = source;
    if (body.empty()) raise(ErrorCode::InvalidArgument, "OpenCL: no kernel program named '{}'", part);
    text += fmt::format("\n#line 1 \"{}.cl\"\n{}", part, body);
    start = plus + 1;
  }
  return text;
}

}  // namespace tessera::opencl
