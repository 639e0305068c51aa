// DUP, CONT, CPY: the source's elements, taken in its logical row-major order, are written into
// the destination's logical order (the shapes may differ when the element counts match).
// Same-type copies move bytes (exact for every type, quantized blocks included); other copies go
// through f32, and a quantized destination is quantized one row at a time.
#include <cstring>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"

namespace tessera::cpu {
namespace {

// Address of row r of t (rows numbered in logical order over dims 1..3).
char* row_address(const Tensor& t, int64_t r) {
  const int64_t i1 = r % t.ne[1];
  const int64_t i2 = (r / t.ne[1]) % t.ne[2];
  const int64_t i3 = r / (t.ne[1] * t.ne[2]);
  return static_cast<char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// A position in a tensor's logical order, counted in units of n0 per row (elements, or blocks
// when whole quantized blocks are moved).
struct Cursor {
  const Tensor* t;
  int64_t n0;
  int64_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;

  Cursor(const Tensor& tensor, int64_t units_per_row, int64_t linear) : t(&tensor), n0(units_per_row) {
    i0 = linear % n0;
    linear /= n0;
    i1 = linear % t->ne[1];
    linear /= t->ne[1];
    i2 = linear % t->ne[2];
    i3 = linear / t->ne[2];
  }
  bool at_end() const { return i3 >= t->ne[3]; }
  const char* row() const {
    return static_cast<const char*>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
  }
  const char* unit() const { return row() + i0 * t->nb[0]; }
  // Steps to the next unit; true when that starts a new row.
  bool next() {
    if (++i0 < n0) return false;
    i0 = 0;
    if (++i1 < t->ne[1]) return true;
    i1 = 0;
    if (++i2 < t->ne[2]) return true;
    i2 = 0;
    ++i3;
    return true;
  }
};

// Reads a source's elements as f32 in logical order; quantized rows are dequantized whole.
class SourceReader {
 public:
  SourceReader(const Tensor& src, int64_t linear)
      : cur_(src, src.ne[0], linear), quantized_(is_quantized(src.type)) {
    if (quantized_) {
      row_.resize(static_cast<size_t>(src.ne[0]));
      load_row();
    }
  }
  float value() const {
    return quantized_ ? row_[static_cast<size_t>(cur_.i0)] : load_f32(cur_.t->type, cur_.unit());
  }
  void next() {
    if (cur_.next() && quantized_ && !cur_.at_end()) load_row();
  }

 private:
  void load_row() { to_f32_row(cur_.t->type, cur_.row(), row_.data(), cur_.t->ne[0]); }
  Cursor cur_;
  bool quantized_;
  std::vector<float> row_;
};

// The plain path: each destination row pulls its elements from the source's logical order.
void copy_reference(const ComputeContext& ctx, const Tensor& src, Tensor& dst) {
  const int64_t dn0 = dst.ne[0];
  if (src.type == dst.type) {
    // Move whole units: elements, or blocks for quantized types (rows hold whole blocks, so the
    // logical orders of blocks agree whenever those of elements do).
    const int64_t bs = traits(dst.type).block_size;
    const size_t unit_bytes = traits(dst.type).block_bytes;
    const int64_t du = dn0 / bs;
    ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
      Cursor s(src, src.ne[0] / bs, begin * du);
      for (int64_t r = begin; r < end; ++r) {
        char* d = row_address(dst, r);
        for (int64_t u = 0; u < du; ++u, s.next()) std::memcpy(d + u * dst.nb[0], s.unit(), unit_bytes);
      }
    });
    return;
  }
  if (is_quantized(dst.type)) {
    // The destination is contiguous (checked by the builder): gather a row, quantize it.
    ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
      std::vector<float> buf(static_cast<size_t>(dn0));
      SourceReader s(src, begin * dn0);
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t i = 0; i < dn0; ++i, s.next()) buf[static_cast<size_t>(i)] = s.value();
        from_f32_row(dst.type, buf.data(), row_address(dst, r), dn0);
      }
    });
    return;
  }
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    SourceReader s(src, begin * dn0);
    for (int64_t r = begin; r < end; ++r) {
      char* d = row_address(dst, r);
      for (int64_t i = 0; i < dn0; ++i, s.next()) store_f32(dst.type, d + i * dst.nb[0], s.value());
    }
  });
}

// Both sides contiguous: whole-row memcpy or row conversions. Same bytes as copy_reference.
bool copy_fast(const ComputeContext& ctx, const Tensor& src, Tensor& dst) {
  if (!src.is_contiguous() || !dst.is_contiguous()) return false;
  const int64_t dn0 = dst.ne[0];
  const size_t drow = dst.row_size();
  const char* s = static_cast<const char*>(src.data);
  char* d = static_cast<char*>(dst.data);
  if (src.type == dst.type) {
    ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
      std::memcpy(d + begin * drow, s + begin * drow, static_cast<size_t>(end - begin) * drow);
    });
    return true;
  }
  if (is_quantized(src.type)) return false;  // source rows would not line up with destination rows
  const size_t esize = traits(src.type).block_bytes;
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> buf(static_cast<size_t>(dn0));
    for (int64_t r = begin; r < end; ++r) {
      to_f32_row(src.type, s + static_cast<size_t>(r * dn0) * esize, buf.data(), dn0);
      from_f32_row(dst.type, buf.data(), d + static_cast<size_t>(r) * drow, dn0);
    }
  });
  return true;
}

}  // namespace

void run_copy(const ComputeContext& ctx, Tensor& dst) {
  const Tensor* src = dst.src[0];
  TESSERA_ASSERT(src != nullptr && src->data != nullptr);
  if (src->nelements() != dst.nelements())
    raise(ErrorCode::InvalidArgument, "{}: element counts differ ({} vs {})", op_name(dst.op),
          src->describe(), dst.describe());
  if (is_quantized(src->type) && !src->rows_contiguous())
    raise(ErrorCode::InvalidArgument, "{}: quantized source {} must have whole rows", op_name(dst.op),
          src->describe());
  if (is_quantized(dst.type) && src->type != dst.type && !dst.is_contiguous())
    raise(ErrorCode::InvalidArgument, "{}: quantized destination {} must be contiguous", op_name(dst.op),
          dst.describe());
  if (!ctx.reference() && copy_fast(ctx, *src, dst)) return;
  copy_reference(ctx, *src, dst);
}

}  // namespace tessera::cpu
