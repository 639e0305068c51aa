// Buffer::place is public API: bad placements are Errors, never aborts.
#include <gtest/gtest.h>

#include <cstdint>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/error.h"
#include "tessera/ops.h"

using namespace tessera;

TEST(HostBuffer, PlacesATensorAtAnOffset) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, 4, 2);
  auto buffer = host_buffer_type().allocate(64 + t->nbytes());
  buffer->place(*t, 64);
  EXPECT_EQ(t->buffer, buffer.get());
  EXPECT_EQ(static_cast<char*>(t->data), static_cast<char*>(buffer->base()) + 64);
}

TEST(HostBuffer, PlacingAViewIsAnError) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, 4, 2);
  Tensor* v = ops::reshape(ctx, t, 8);
  auto buffer = host_buffer_type().allocate(t->nbytes());
  try {
    buffer->place(*v, 0);
    FAIL() << "a view was placed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("view"), std::string::npos) << e.what();
  }
  EXPECT_EQ(v->buffer, nullptr);
}

TEST(HostBuffer, PlacementOutsideTheBufferIsAnError) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, 4, 2);  // 32 bytes
  auto buffer = host_buffer_type().allocate(64);
  EXPECT_THROW(buffer->place(*t, 33), Error);
  EXPECT_THROW(buffer->place(*t, SIZE_MAX - 8), Error);  // offset + size would wrap around
  EXPECT_EQ(t->buffer, nullptr);
  buffer->place(*t, 32);  // exactly fits
  EXPECT_EQ(t->buffer, buffer.get());
}
