#include "opencl/oplib.h"

#include "core/check.h"
#include "device/split_layout.h"

namespace tessera::opencl {
namespace {

constexpr size_t kGroup = 64;

bool always(const Tensor&) { return true; }
void nothing(const device::OpContext&, Tensor&) {}

}  // namespace

void register_views(device::OpLibrary& lib) {
  for (Op op : {Op::None, Op::Reshape, Op::View, Op::Permute, Op::Transpose})
    lib.set(op, {&always, &nothing});
}

std::shared_ptr<const device::OpLibrary> make_op_library() {
  auto lib = std::make_shared<device::OpLibrary>();
  // The layout is a static (tensor_arg reads it): an aliasing pointer that owns nothing.
  lib->set_weight_layout(std::shared_ptr<const WeightLayout>(std::shared_ptr<void>(), &weight_layout()));
  register_views(*lib);
  register_copy(*lib);
  register_get_rows(*lib);
  register_binary(*lib);
  register_unary(*lib);
  register_shape(*lib);
  register_resample(*lib);
  register_conv(*lib);
  register_reduce(*lib);
  register_norm(*lib);
  register_softmax(*lib);
  register_rope(*lib);
  register_mul_mat(*lib);
  register_add_id(*lib);
  register_glu(*lib);
  return lib;
}

const device::SplitLayout& weight_layout() {
  static const device::SplitLayout layout(512);
  return layout;
}

bool decodes_blocks(DType type) noexcept {
  switch (type) {
    case DType::Q4_0:
    case DType::Q8_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::MXFP4:
      return true;
    default:
      return false;
  }
}

bool encodes_blocks(DType type) noexcept {
  return type == DType::Q4_0 || type == DType::Q8_0 || type == DType::Q4_1 || type == DType::Q5_0 ||
         type == DType::Q5_1 || type == DType::IQ4_NL;
}

OpenClRuntime& runtime_of(const device::OpContext& ctx) { return static_cast<OpenClRuntime&>(*ctx.runtime); }

cl_kernel kernel_of(const device::OpContext& ctx, std::string_view program, std::string_view name) {
  return runtime_of(ctx).kernel(*ctx.stream, program, name);
}

ClAddress address_arg(const device::OpContext& ctx, const void* ptr, size_t size) {
  return runtime_of(ctx).resolve(ctx.device, ptr, size);
}

TensorArg tensor_arg(const device::OpContext& ctx, const Tensor& t) {
  TensorArg a;
  a.type = static_cast<cl_int>(t.type);
  for (int d = 0; d < 4; ++d) {
    a.ne.s[d] = t.ne[static_cast<size_t>(d)];
    a.nb.s[d] = t.nb[static_cast<size_t>(d)];
  }
  if (weight_layout().splits(t.type)) {
    const auto q = device::quant_addresses(t);
    const ClAddress quants = address_arg(ctx, q.quants, 0);
    const ClAddress scales = address_arg(ctx, q.scales, 0);
    TESSERA_ASSERT(quants.mem == scales.mem);
    a.mem = quants.mem;
    a.offset = quants.offset;
    a.scale_offset = scales.offset;
  } else {
    const ClAddress at = address_arg(ctx, t.data, t.nbytes());
    a.mem = at.mem;
    a.offset = at.offset;
  }
  return a;
}

void launch(const device::OpContext& ctx, cl_kernel k, std::array<size_t, 3> global) {
  if (global[0] == 0 || global[1] == 0 || global[2] == 0) return;
  OpenClRuntime& rt = runtime_of(ctx);
  size_t max_group = 0;
  clGetKernelWorkGroupInfo(k, rt.device_id(ctx.device), CL_KERNEL_WORK_GROUP_SIZE, sizeof max_group,
                           &max_group, nullptr);
  const size_t group = std::min(kGroup, std::max<size_t>(1, max_group));
  global[0] = (global[0] + group - 1) / group * group;
  const size_t local[3] = {group, 1, 1};
  check(
      clEnqueueNDRangeKernel(rt.queue(*ctx.stream), k, 3, nullptr, global.data(), local, 0, nullptr, nullptr),
      rt.properties(ctx.device).name, "clEnqueueNDRangeKernel");
}

}  // namespace tessera::opencl
