// Writing the grid I-quants: llama.cpp's bytes for four rows of 512 weights (tests/fixtures/iquants,
// made by gen.sh with ggml's own quantizer) under the unit importance, a random importance and,
// for the types ggml writes without one, none; each decoded row near its input; the types that
// need an importance matrix refused without one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tessera/error.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

constexpr int64_t kRow = 512, kRows = 4;

std::vector<char> read_file(const std::string& name) {
  const std::string path = std::string(TESSERA_FIXTURES_DIR) + "/iquants/" + name;
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<float> read_floats(const std::string& name) {
  const std::vector<char> bytes = read_file(name);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

struct Case {
  DType type;
  const char* file;
  double max_nmse;  // of a decoded Gaussian row (rows 0 and 3) against its input
};

const Case kCases[] = {
    {DType::IQ2_XXS, "iq2_xxs", 0.25}, {DType::IQ2_XS, "iq2_xs", 0.2}, {DType::IQ2_S, "iq2_s", 0.15},
    {DType::IQ3_XXS, "iq3_xxs", 0.08}, {DType::IQ3_S, "iq3_s", 0.06},  {DType::IQ1_S, "iq1_s", 0.5},
    {DType::IQ1_M, "iq1_m", 0.4},
};

std::vector<uint8_t> quantize_rows(DType type, const std::vector<float>& rows, const float* importance) {
  const size_t row = row_bytes(type, kRow);
  std::vector<uint8_t> out(row * kRows);
  for (int64_t r = 0; r < kRows; ++r)
    quantize_weights(type, rows.data() + r * kRow, out.data() + r * row, kRow, importance);
  return out;
}

double nmse(const float* x, const float* y, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    den += double(x[i]) * x[i];
  }
  return num / den;
}

// The first differing byte, for a readable failure.
std::string first_difference(const std::vector<uint8_t>& got, const std::vector<char>& want, size_t block) {
  if (got.size() != want.size())
    return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != static_cast<uint8_t>(want[i]))
      return "byte " + std::to_string(i) + " (block " + std::to_string(i / block) + ", offset " +
             std::to_string(i % block) + "): " + std::to_string(got[i]) + " vs " +
             std::to_string(static_cast<uint8_t>(want[i]));
  return "";
}

void expect_llama_bytes(const Case& c, const std::vector<float>& rows, const char* importance_name,
                        const float* importance) {
  const std::vector<uint8_t> got = quantize_rows(c.type, rows, importance);
  const std::vector<char> want = read_file(std::string(c.file) + "." + importance_name + ".bin");
  EXPECT_EQ(first_difference(got, want, traits(c.type).block_bytes), "") << c.file << " " << importance_name;
  // Decoded, the Gaussian rows come back within the format's error.
  std::vector<float> y(kRow);
  const size_t row = row_bytes(c.type, kRow);
  for (int64_t r : {0, 3}) {
    to_f32_row(c.type, got.data() + r * row, y.data(), kRow);
    EXPECT_LT(nmse(rows.data() + r * kRow, y.data(), kRow), c.max_nmse)
        << c.file << " " << importance_name << " row " << r;
  }
}

}  // namespace

TEST(QuantIqWrite, LlamaBytesWithUnitImportance) {
  const auto rows = read_floats("rows.f32"), unit = read_floats("unit.f32");
  ASSERT_EQ(rows.size(), size_t(kRow * kRows));
  ASSERT_EQ(unit.size(), size_t(kRow));
  for (const Case& c : kCases) expect_llama_bytes(c, rows, "unit", unit.data());
}

TEST(QuantIqWrite, LlamaBytesWithRandomImportance) {
  const auto rows = read_floats("rows.f32"), importance = read_floats("importance.f32");
  ASSERT_EQ(importance.size(), size_t(kRow));
  for (const Case& c : kCases) expect_llama_bytes(c, rows, "importance", importance.data());
}

TEST(QuantIqWrite, LlamaBytesWithoutImportance) {
  // ggml writes IQ2_S, IQ3_XXS, IQ3_S and IQ1_M without an importance matrix (weights from x^2),
  // and from_f32_row (CPY) gives the same bits for the first three.
  const auto rows = read_floats("rows.f32");
  for (const Case& c : kCases) {
    if (grid_iquant_needs_importance(c.type)) continue;
    expect_llama_bytes(c, rows, "none", nullptr);
    if (c.type == DType::IQ1_M) continue;  // ggml has no row conversion into IQ1_M
    const size_t row = row_bytes(c.type, kRow);
    std::vector<uint8_t> converted(row);
    const auto want = read_file(std::string(c.file) + ".none.bin");
    from_f32_row(c.type, rows.data() + kRow, converted.data(), kRow);
    EXPECT_EQ(0, std::memcmp(converted.data(), want.data() + row, row)) << c.file;
  }
}

TEST(QuantIqWrite, TypesThatNeedAnImportanceMatrixRefuseToWriteWithoutOne) {
  std::vector<float> x(256, 0.5f);
  std::vector<uint8_t> out(256);
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ1_S}) {
    EXPECT_TRUE(grid_iquant_needs_importance(t));
    try {
      quantize_weights(t, x.data(), out.data(), 256);
      ADD_FAILURE() << name(t) << " was written without an importance matrix";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("importance matrix"), std::string::npos) << e.what();
    }
  }
  for (DType t : {DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_M, DType::Q4_K})
    EXPECT_FALSE(grid_iquant_needs_importance(t)) << name(t);
}

TEST(QuantIqWrite, ZeroAndTinyRowsGiveZeroBlocks) {
  // All-zero super-blocks: d = 0 everywhere, and the decoded row is zero.
  std::vector<float> zeros(256, 0.0f), unit(256, 1.0f), y(256);
  for (const Case& c : kCases) {
    std::vector<uint8_t> out(traits(c.type).block_bytes, 0x5a);
    quantize_weights(c.type, zeros.data(), out.data(), 256, unit.data());
    to_f32_row(c.type, out.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f) << c.file;
  }
}

TEST(QuantIqWrite, OtherTypesTakeTheImportanceAsLlamaCppDoes) {
  // With an importance matrix llama-quantize searches the legacy types, the K-quants and IQ4 under
  // importance * sqrt(sigma^2 + x^2) (ggml's quantize_row_*_impl): its bytes for the random one.
  const auto rows = read_floats("rows.f32"), importance = read_floats("importance.f32");
  const Case cases[] = {
      {DType::Q4_0, "q4_0", 0.01},     {DType::Q4_1, "q4_1", 0.01},    {DType::Q5_0, "q5_0", 0.003},
      {DType::Q5_1, "q5_1", 0.003},    {DType::Q2_K, "q2_k", 0.12},    {DType::Q3_K, "q3_k", 0.04},
      {DType::Q4_K, "q4_k", 0.01},     {DType::Q5_K, "q5_k", 0.003},   {DType::Q6_K, "q6_k", 0.001},
      {DType::IQ4_NL, "iq4_nl", 0.01}, {DType::IQ4_XS, "iq4_xs", 0.01}};
  for (const Case& c : cases) {
    expect_llama_bytes(c, rows, "importance", importance.data());
    // Without one, the same rows give the reference rounding's bytes (from_f32_row), not these.
    const size_t row = row_bytes(c.type, kRow);
    std::vector<uint8_t> plain(row);
    quantize_weights(c.type, rows.data(), plain.data(), kRow);
    std::vector<uint8_t> weighted(row);
    quantize_weights(c.type, rows.data(), weighted.data(), kRow, importance.data());
    EXPECT_NE(0, std::memcmp(plain.data(), weighted.data(), row)) << c.file;
  }
}

TEST(QuantIqWrite, NonFiniteRowsDoNotCrash) {
  // ggml asserts on such rows; here every type still writes whole blocks (whatever their values).
  std::vector<float> x(256), unit(256, 1.0f);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  x[5] = std::nanf("");
  x[77] = INFINITY;
  x[200] = -INFINITY;
  for (const Case& c : kCases) {
    std::vector<uint8_t> out(traits(c.type).block_bytes);
    quantize_weights(c.type, x.data(), out.data(), 256, unit.data());
    std::vector<float> y(256);
    to_f32_row(c.type, out.data(), y.data(), 256);
  }
}
