// DeviceBackend on the OpenCL runtime (two PoCL devices): async transfers, events across
// devices, copies, error reporting, and the supports / offload policy.
#include "device/backend.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "opencl/opencl_test_util.h"
#include "tessera/blocks.h"
#include "tessera/convert.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/graph.h"
#include "tessera/op_types.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

std::vector<float> dequantized_row_q8_0(const std::vector<uint8_t>& image, int64_t ne0, int64_t row) {
  std::vector<float> out(static_cast<size_t>(ne0));
  const size_t rb = row_bytes(DType::Q8_0, ne0);
  dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(image.data() + static_cast<size_t>(row) * rb),
                      out.data(), ne0);
  return out;
}

}  // namespace

TEST(DeviceBackend, AsyncUploadKernelDownloadEqualsTheCpu) {
  Device& dev = test::opencl_device(0);
  std::mt19937 rng(11);
  const auto w_image = test::random_image(DType::Q8_0, {64, 10, 1, 1}, rng);
  const int32_t rows[4] = {3, 0, 9, 3};

  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q8_0, 64, 10);
  Tensor* idx = ctx.new_tensor(DType::I32, 4);
  Tensor* out = ops::get_rows(ctx, w, idx);
  auto buffer = test::allocate_all(dev.buffer_type(), ctx);
  auto backend = dev.make_backend();
  // Everything below is queued; the caller only waits at synchronize.
  backend->set_async(*w, w_image.data(), 0, w_image.size());  // re-laid through pinned staging
  backend->set_async(*idx, rows, 0, sizeof rows);
  Graph graph({out});
  backend->compute(graph);
  std::vector<float> result(64 * 4);
  backend->get_async(*out, result.data(), 0, result.size() * 4);
  std::vector<uint8_t> w_back(w_image.size());
  backend->get_async(*w, w_back.data(), 0, w_back.size());  // converted back on the host, in order
  backend->synchronize();

  EXPECT_EQ(w_back, w_image);
  for (int r = 0; r < 4; ++r) {
    const auto expected = dequantized_row_q8_0(w_image, 64, rows[r]);
    for (int i = 0; i < 64; ++i)
      ASSERT_EQ(result[r * 64 + i], expected[i]) << "row " << r << " element " << i;
  }
  // The same graph on the CPU reference backend.
  Context host(true);
  Tensor* hw = host.new_tensor(DType::Q8_0, 64, 10);
  Tensor* hidx = host.new_tensor(DType::I32, 4);
  Tensor* hout = ops::get_rows(host, hw, hidx);
  tensor_set(*hw, w_image.data(), 0, w_image.size());
  tensor_set(*hidx, rows, 0, sizeof rows);
  Graph hgraph({hout});
  cpu::CpuBackend(1, cpu::KernelSet::Reference).compute(hgraph);
  EXPECT_EQ(0, std::memcmp(hout->data, result.data(), result.size() * 4));
}

TEST(DeviceBackend, AnEventMakesDevice1WaitForDevice0) {
  Device& d0 = test::opencl_device(0);
  Device& d1 = test::opencl_device(1);
  const int64_t n = int64_t{1} << 22;  // long enough that an unordered copy would read stale data
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.25f - 100.0f;

  Context c0, c1;
  Tensor* a = c0.new_tensor(DType::F32, n);
  Tensor* h = c0.new_tensor(DType::F16, n);
  Tensor* y = ops::cpy(c0, a, h);
  Tensor* z = c1.new_tensor(DType::F16, n);
  auto b0buf = test::allocate_all(d0.buffer_type(), c0);
  auto b1buf = test::allocate_all(d1.buffer_type(), c1);
  b1buf->clear(0);
  auto b0 = d0.make_backend();
  auto b1 = d1.make_backend();

  b0->set_async(*a, x.data(), 0, x.size() * 4);
  Graph g({y});
  b0->compute(g);
  auto done = b0->create_event();
  done->record(*b0);
  b1->wait(*done);  // device 1's queue waits; the host does not
  ASSERT_TRUE(b1->copy_async(*h, *z));
  std::vector<uint16_t> got(static_cast<size_t>(n));
  b1->get_async(*z, got.data(), 0, got.size() * 2);
  b1->synchronize();  // only device 1 is synchronized
  for (int64_t i = 0; i < n; i += 997)
    ASSERT_EQ(got[static_cast<size_t>(i)], fp32_to_fp16(x[static_cast<size_t>(i)])) << i;
  EXPECT_EQ(got.back(), fp32_to_fp16(x.back()));
  b0->synchronize();
}

TEST(DeviceBackend, AsyncErrorsSurfaceAtSynchronizeNamingTheOp) {
  Device& dev = test::opencl_device(1);
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::F32, 8, 5);
  Tensor* idx = ctx.new_tensor(DType::I32, 2);
  Tensor* out = ops::get_rows(ctx, w, idx);
  out->name = "embd";
  auto buffer = test::allocate_all(dev.buffer_type(), ctx);
  buffer->clear(0);
  auto backend = dev.make_backend();
  const int32_t bad[2] = {0, 7};
  backend->set_async(*idx, bad, 0, sizeof bad);
  Graph graph({out});
  ASSERT_NO_THROW(backend->compute(graph));  // the index is only known on the device
  auto ev = backend->create_event();
  ev->record(*backend);
  EXPECT_THROW(ev->synchronize(), Error);
  try {
    backend->synchronize();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    const std::string m = e.what();
    EXPECT_NE(m.find("GET_ROWS"), std::string::npos) << m;
    EXPECT_NE(m.find("embd"), std::string::npos) << m;
    EXPECT_NE(m.find("row index 7"), std::string::npos) << m;
    EXPECT_NE(m.find("OpenCL1"), std::string::npos) << m;
  }
  // Reported once; the backend keeps working.
  const int32_t good[2] = {4, 1};
  backend->set_async(*idx, good, 0, sizeof good);
  backend->compute(graph);
  backend->synchronize();
}

TEST(DeviceBackend, UnsupportedOpsAndForeignMemoryAreErrors) {
  Device& dev = test::opencl_device(0);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, 4, 4);
  Tensor* b = ctx.new_tensor(DType::F32, 4, 4);
  Tensor* m = ops::mul_mat(ctx, a, b);
  m->name = "scores";
  // Every op of the required set runs on OpenCL; an f16 MUL_MAT result (no builder makes one) does not.
  m->type = DType::F16;
  m->nb = contiguous_strides(DType::F16, m->ne);
  auto buffer = test::allocate_all(dev.buffer_type(), ctx);
  auto backend = dev.make_backend();
  EXPECT_FALSE(backend->supports(*m));
  Graph graph({m});
  try {
    backend->compute(graph);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("MUL_MAT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scores"), std::string::npos) << e.what();
  }
  // A source in host memory cannot be read by a device kernel.
  Context host(true);
  Tensor* h = host.new_tensor(DType::F32, 4, 4);
  Tensor* c = ops::cont(ctx, h);
  auto more = test::allocate_all(dev.buffer_type(), ctx);
  Graph g2({c});
  EXPECT_THROW(backend->compute(g2), Error);
}

TEST(DeviceBackend, SupportsTheDataMovementOpsOfEveryType) {
  Device& dev = test::opencl_device(0);
  auto backend = dev.make_backend();
  Context ctx;
  for (DType s : kAllDTypes) {
    if (!op_types_defined(Op::Dup, OpTypes{s, {s}})) continue;  // not in the op table
    Tensor* a = ctx.new_tensor(s, kSuperBlock, 3);
    EXPECT_TRUE(backend->supports(*ops::dup(ctx, a))) << name(s);
    EXPECT_TRUE(backend->supports(*ops::cont(ctx, ops::permute(ctx, a, 0, 2, 1, 3)))) << name(s);
    EXPECT_TRUE(backend->supports(*ops::get_rows(ctx, a, ctx.new_tensor(DType::I32, 2)))) << name(s);
    EXPECT_TRUE(backend->supports(*ops::reshape(ctx, a, kSuperBlock * 3))) << name(s);
    for (DType d : kAllDTypes) {
      if (!op_types_defined(Op::Cpy, OpTypes{d, {s, d}})) continue;  // not a valid CPY
      // OpenCL quantizes only into the 32-element types (README); CPY into the K-quants and IQ4_XS
      // from another type, whose quantizers search, is left to the CPU, and into MXFP4, whose
      // exponent is ggml's floor(log2f(amax)) (libm's rounding, which OpenCL's log2 need not have).
      const bool searched = d == DType::Q2_K || d == DType::Q3_K || d == DType::Q4_K || d == DType::Q5_K ||
                            d == DType::Q6_K || d == DType::IQ4_XS || d == DType::MXFP4;
      EXPECT_EQ(backend->supports(*ops::cpy(ctx, a, ctx.new_tensor(d, kSuperBlock, 3))), !searched || s == d)
          << name(s) << "->" << name(d);
    }
  }
  // Type mixes no kernel handles are refused (made by hand: the builders reject them too).
  Tensor* f = ctx.new_tensor(DType::F32, 8, 8);
  Tensor* sm = ops::soft_max(ctx, f);
  EXPECT_TRUE(backend->supports(*sm));
  sm->type = DType::F16;
  EXPECT_FALSE(backend->supports(*sm));
}

TEST(DeviceBackend, OffloadPolicyFollowsTheBatchSize) {
  Device& dev = test::opencl_device(0);
  Context ctx;
  Tensor* small = ops::rms_norm(ctx, ctx.new_tensor(DType::F32, 64, 31), 1e-5f);
  Tensor* batch = ops::rms_norm(ctx, ctx.new_tensor(DType::F32, 64, 32), 1e-5f);
  Tensor* rows = ops::get_rows(ctx, ctx.new_tensor(DType::F32, 64, 100), ctx.new_tensor(DType::I32, 64));
  {
    auto backend = dev.make_backend();
    EXPECT_FALSE(backend->wants_offload(*small));
    EXPECT_TRUE(backend->wants_offload(*batch));
    EXPECT_FALSE(backend->wants_offload(*rows));  // ne1 = 64, but GET_ROWS stays with its table
    // ROPE's batch is its tokens (ne[2]), not its heads (ne[1]): one token of a 32-head model
    // stays, a 32-token prompt of a 4-head model goes.
    ops::RopeParams rp;
    rp.n_dims = 64;
    Tensor* rope_one =
        ops::rope(ctx, ctx.new_tensor(DType::F32, 64, 32, 1), ctx.new_tensor(DType::I32, 1), nullptr, rp);
    Tensor* rope_prompt =
        ops::rope(ctx, ctx.new_tensor(DType::F32, 64, 4, 32), ctx.new_tensor(DType::I32, 32), nullptr, rp);
    EXPECT_FALSE(backend->wants_offload(*rope_one));
    EXPECT_TRUE(backend->wants_offload(*rope_prompt));
    // MUL_MAT's batch is b's columns.
    Tensor* w = ctx.new_tensor(DType::F32, 64, 128);
    EXPECT_FALSE(backend->wants_offload(*ops::mul_mat(ctx, w, ctx.new_tensor(DType::F32, 64, 1))));
    EXPECT_TRUE(backend->wants_offload(*ops::mul_mat(ctx, w, ctx.new_tensor(DType::F32, 64, 32))));
  }
  setenv("TESSERA_OFFLOAD_MIN_BATCH", "4", 1);
  auto backend = dev.make_backend();
  unsetenv("TESSERA_OFFLOAD_MIN_BATCH");
  EXPECT_TRUE(backend->wants_offload(*small));
  EXPECT_TRUE(backend->wants_offload(*ops::rms_norm(ctx, ctx.new_tensor(DType::F32, 64, 4), 1e-5f)));
  EXPECT_FALSE(backend->wants_offload(*ops::rms_norm(ctx, ctx.new_tensor(DType::F32, 64, 3), 1e-5f)));
  // A copy has no batch: heads merged at one token ([8, 32 heads, 1]) stay, whatever ne[1] is.
  EXPECT_FALSE(backend->wants_offload(*ops::cont(ctx, ctx.new_tensor(DType::F32, 8, 32, 1))));
}
