// The quantizer with importance matrices and the I-quant file types: llama-quantize's outputs of
// tiny-llama-f32.gguf (../shared/models/oracle, made by peer-bench quantize with an importance
// matrix of ones where llama.cpp needs one) must come out byte for byte from an imatrix GGUF the
// test writes; llama.cpp's imatrix formats read back; a mismatched or missing matrix is an Error
// naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/cli.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/quantize.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

const std::string kOracle = std::string(TESSERA_SHARED_DIR) + "/models/oracle/";

std::filesystem::path temp_path(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_imatrix_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::vector<char> read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// An imatrix GGUF as llama-imatrix writes it: per tensor NAME.in_sum2 [ne0, n_mat] and NAME.counts
// [1, n_mat], with in_sum2 = value * count. `value` gives the importance of column i of matrix j.
struct Entry {
  std::string name;
  int64_t ne0 = 0, n_mat = 1;
};
void write_imatrix(const std::filesystem::path& path, const std::vector<Entry>& entries,
                   float (*value)(int64_t i, int64_t j), float count = 7.0f) {
  gguf::Writer w;
  w.set("general.type", std::string("imatrix"));
  w.set("imatrix.datasets", gguf::ArrayValue::of(std::vector<std::string>{"test"}));
  w.set("imatrix.chunk_count", uint32_t{1});
  w.set("imatrix.chunk_size", uint32_t{512});
  for (const Entry& e : entries) {
    std::vector<float> sums(static_cast<size_t>(e.ne0 * e.n_mat)),
        counts(static_cast<size_t>(e.n_mat), count);
    for (int64_t j = 0; j < e.n_mat; ++j)
      for (int64_t i = 0; i < e.ne0; ++i) sums[static_cast<size_t>(j * e.ne0 + i)] = value(i, j) * count;
    const int64_t sum_ne[2] = {e.ne0, e.n_mat}, count_ne[2] = {1, e.n_mat};
    w.add_tensor(e.name + ".in_sum2", DType::F32, sum_ne, sums.data(), sums.size() * 4);
    w.add_tensor(e.name + ".counts", DType::F32, count_ne, counts.data(), counts.size() * 4);
  }
  w.write(path.string());
}

// One entry per 2-D and 3-D tensor of the model (what peer-bench's unit-imatrix passes).
std::vector<Entry> entries_of(const gguf::File& model) {
  std::vector<Entry> out;
  for (const auto& t : model.tensors())
    if (t.n_dims >= 2) out.push_back({t.name, t.ne[0], t.ne[2]});
  return out;
}

float one(int64_t, int64_t) { return 1.0f; }

llm::QuantizeOptions options(const std::string& type, bool pure, const std::string& imatrix) {
  llm::QuantizeOptions o;
  o.type = type;
  o.pure = pure;
  o.threads = 2;
  o.imatrix = imatrix;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(QuantizeImatrix, IQuantFileTypes) {
  EXPECT_EQ(llm::file_type("iq2_xxs").ftype, 19u);
  EXPECT_EQ(llm::file_type("IQ2_XS").ftype, 20u);
  EXPECT_EQ(llm::file_type("IQ3_XS").ftype, 22u);
  EXPECT_EQ(llm::file_type("IQ3_XXS").ftype, 23u);
  EXPECT_EQ(llm::file_type("IQ1_S").ftype, 24u);
  EXPECT_EQ(llm::file_type("IQ3_S").ftype, 26u);
  EXPECT_EQ(llm::file_type("IQ3_M").ftype, 27u);
  EXPECT_EQ(llm::file_type("IQ2_S").ftype, 28u);
  EXPECT_EQ(llm::file_type("IQ2_M").ftype, 29u);
  EXPECT_EQ(llm::file_type("IQ1_M").ftype, 31u);
  // llama.cpp's names: "IQ2_S" is IQ2_XS-based, "IQ2_M" IQ2_S-based, IQ3_XS/IQ3_M IQ3_S-based.
  EXPECT_EQ(llm::file_type("IQ2_S").base, DType::IQ2_XS);
  EXPECT_EQ(llm::file_type("IQ2_M").base, DType::IQ2_S);
  EXPECT_EQ(llm::file_type("IQ3_XS").base, DType::IQ3_S);
  EXPECT_EQ(llm::file_type("IQ3_M").base, DType::IQ3_S);
  EXPECT_EQ(llm::tensor_type("iq2_xxs"), DType::IQ2_XXS);
  EXPECT_EQ(llm::tensor_type("IQ1_M"), DType::IQ1_M);
}

// Q2_K_S was also compared by hand on a model that reaches its two rules (make_model.py --dim 256
// --layers 8 --heads 8 --kv-heads 2 --ff 512: attn_v in Q4_K, the first layer's ffn_down in Q4_K):
// the same bytes as peer-bench quantize ... 21 unit-imatrix (2026-12-07).
TEST(QuantizeImatrix, SameBytesAsLlamaQuantizeWithAUnitImportanceMatrix) {
  const std::string in = kOracle + "tiny-llama-f32.gguf";
  const auto imatrix = temp_path("unit.imatrix.gguf");
  write_imatrix(imatrix, entries_of(gguf::File::open(in)), one);
  // peer-bench quantize tiny-llama-f32.gguf OUT FTYPE [pure] [unit-imatrix] (the oracle README).
  const struct {
    const char* file;
    const char* type;
    bool pure, unit;
  } cases[] = {
      {"iq2_xxs", "IQ2_XXS", true, true}, {"iq2_xs", "IQ2_XS", true, true},  {"iq2_s", "IQ2_M", true, true},
      {"iq3_xxs", "IQ3_XXS", true, true}, {"iq1_s", "IQ1_S", true, true},    {"iq1_m", "IQ1_M", true, true},
      {"iq3_s", "IQ3_S", true, false},    {"iq4_xs", "IQ4_XS", true, false}, {"iq2_m", "IQ2_M", false, true},
      {"iq3_m", "IQ3_M", false, false},   {"q2_k_s", "Q2_K_S", false, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const auto out = temp_path(std::string("ours-") + c.file + ".gguf");
    llm::quantize_model(in, out.string(), options(c.type, c.pure, c.unit ? imatrix.string() : ""));
    const auto ours = read_all(out);
    // The shared oracles, and the mixes they lack from tests/fixtures/quant_mixes (README there).
    const std::string fixture =
        std::string(TESSERA_FIXTURES_DIR) + "/quant_mixes/tiny-llama-" + c.file + ".gguf";
    const auto theirs =
        read_all(std::filesystem::exists(fixture) ? fixture : kOracle + "tiny-llama-" + c.file + ".gguf");
    EXPECT_EQ(ours.size(), theirs.size());
    EXPECT_TRUE(ours == theirs)
        << "first difference at byte "
        << std::mismatch(ours.begin(), ours.end(), theirs.begin(), theirs.end()).first - ours.begin();
    std::filesystem::remove(out);
  }
  std::filesystem::remove(imatrix);
}

TEST(QuantizeImatrix, ReadsBothFormatsAsMeansOfSquares) {
  // GGUF: in_sum2 / counts per matrix, 1 for a matrix that saw no input.
  const auto gguf_path = temp_path("means.imatrix.gguf");
  {
    gguf::Writer w;
    w.set("general.type", std::string("imatrix"));
    w.set("imatrix.datasets", gguf::ArrayValue::of(std::vector<std::string>{"wiki.train.raw"}));
    w.set("imatrix.chunk_count", uint32_t{3});
    w.set("imatrix.chunk_size", uint32_t{512});
    const float sums[6] = {2, 4, 6, 10, 20, 30}, counts[2] = {2, 0};
    const int64_t sum_ne[2] = {3, 2}, count_ne[2] = {1, 2};
    w.add_tensor("blk.0.ffn_down_exps.weight.in_sum2", DType::F32, sum_ne, sums, sizeof sums);
    w.add_tensor("blk.0.ffn_down_exps.weight.counts", DType::F32, count_ne, counts, sizeof counts);
    w.write(gguf_path.string());
  }
  const llm::ImportanceMatrix m = llm::read_imatrix(gguf_path.string());
  ASSERT_EQ(m.values.size(), 1u);
  EXPECT_EQ(m.values.at("blk.0.ffn_down_exps.weight"), (std::vector<float>{1, 2, 3, 1, 1, 1}));
  EXPECT_EQ(m.datasets, std::vector<std::string>{"wiki.train.raw"});
  EXPECT_EQ(m.chunk_count, 3);

  // Legacy .dat: values stored as mean * ncall, divided back.
  const auto dat_path = temp_path("legacy.dat");
  {
    std::ofstream f(dat_path, std::ios::binary);
    auto i32 = [&](int32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    i32(1);
    const std::string name = "blk.0.attn_q.weight";
    i32(static_cast<int32_t>(name.size()));
    f.write(name.data(), static_cast<std::streamsize>(name.size()));
    i32(4);  // ncall
    i32(2);  // nval
    const float v[2] = {8, 12};
    f.write(reinterpret_cast<const char*>(v), sizeof v);
    i32(10);  // last chunk
    const std::string dataset = "calib.txt";
    i32(static_cast<int32_t>(dataset.size()));
    f.write(dataset.data(), static_cast<std::streamsize>(dataset.size()));
  }
  const llm::ImportanceMatrix legacy = llm::read_imatrix(dat_path.string());
  EXPECT_EQ(legacy.values.at("blk.0.attn_q.weight"), (std::vector<float>{2, 3}));
  EXPECT_EQ(legacy.datasets, std::vector<std::string>{"calib.txt"});
  EXPECT_EQ(legacy.chunk_count, 10);

  // Damaged files are CorruptFile errors, never a crash.
  const auto bad = temp_path("bad.dat");
  const auto bytes = read_all(dat_path);
  for (size_t cut : {size_t{3}, size_t{9}, size_t{30}, size_t{40}}) {
    std::ofstream(bad, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    try {
      llm::read_imatrix(bad.string());
      ADD_FAILURE() << "a file cut at " << cut << " bytes was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::CorruptFile) << e.what();
    }
  }
  {
    gguf::Writer w;  // an in_sum2 without its counts
    w.set("imatrix.datasets", gguf::ArrayValue::of(std::vector<std::string>{"x"}));
    w.set("imatrix.chunk_count", uint32_t{1});
    w.set("imatrix.chunk_size", uint32_t{512});
    const float sums[2] = {1, 2};
    const int64_t ne[2] = {2, 1};
    w.add_tensor("a.weight.in_sum2", DType::F32, ne, sums, sizeof sums);
    w.write(bad.string());
  }
  EXPECT_NE(error_of([&] { llm::read_imatrix(bad.string()); }).find("a.weight has in_sum2 but no counts"),
            std::string::npos);
  std::filesystem::remove(gguf_path);
  std::filesystem::remove(dat_path);
  std::filesystem::remove(bad);
}

TEST(QuantizeImatrix, MismatchedOrMissingMatricesAreRefusedByName) {
  const std::string in = kOracle + "tiny-llama-f32.gguf";
  const gguf::File model = gguf::File::open(in);
  const auto out = temp_path("refused.gguf");
  const auto imatrix = temp_path("mismatched.imatrix.gguf");

  // Without an importance matrix, the types llama-quantize refuses.
  for (const char* type : {"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M", "IQ2_S", "IQ3_XXS"}) {
    const std::string e = error_of([&] { llm::quantize_model(in, out.string(), options(type, false, "")); });
    EXPECT_NE(e.find("importance matrix"), std::string::npos) << type << ": " << e;
    EXPECT_NE(e.find("blk.0."), std::string::npos) << type << ": " << e;  // names the tensor
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  // (IQ3_S, IQ2_M's IQ2_S and IQ3_M are written without one.)
  EXPECT_NO_THROW(llm::plan_quantization(model, options("IQ3_S", false, "")));

  // A tensor of another model.
  auto entries = entries_of(model);
  entries.push_back({"blk.99.attn_q.weight", entries[0].ne0, 1});
  write_imatrix(imatrix, entries, one);
  std::string e =
      error_of([&] { llm::quantize_model(in, out.string(), options("IQ2_XXS", false, imatrix.string())); });
  EXPECT_NE(e.find("blk.99.attn_q.weight is not in"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(out));

  // The wrong count of columns for a tensor.
  entries = entries_of(model);
  for (auto& en : entries)
    if (en.name == "blk.0.attn_k.weight") en.ne0 /= 2;
  write_imatrix(imatrix, entries, one);
  e = error_of([&] { llm::quantize_model(in, out.string(), options("Q4_K_M", false, imatrix.string())); });
  EXPECT_NE(e.find("for tensor blk.0.attn_k.weight"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(out));

  // A tensor missing from the matrix that its type cannot do without.
  entries = entries_of(model);
  std::erase_if(entries, [](const Entry& en) { return en.name == "blk.0.ffn_up.weight"; });
  write_imatrix(imatrix, entries, one);
  e = error_of([&] { llm::quantize_model(in, out.string(), options("IQ2_XXS", false, imatrix.string())); });
  EXPECT_NE(e.find("blk.0.ffn_up.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("has none for it"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(out));
  // ... which a type that takes weights only when they are there quantizes without.
  EXPECT_NO_THROW(llm::quantize_model(in, out.string(), options("Q4_K_M", false, imatrix.string())));
  EXPECT_TRUE(std::filesystem::exists(out));
  std::filesystem::remove(out);
  std::filesystem::remove(imatrix);
}

TEST(QuantizeImatrix, TheImportanceChangesTheBytesAndSurvivesTheRoundTrip) {
  // The same model under two importance matrices: the weighted searches differ where the weights
  // do, and each file's weights decode close to the input's.
  const std::string in = kOracle + "tiny-llama-f32.gguf";
  const gguf::File model = gguf::File::open(in);
  const auto unit = temp_path("u.imatrix.gguf"), ramp = temp_path("r.imatrix.gguf");
  write_imatrix(unit, entries_of(model), one);
  write_imatrix(ramp, entries_of(model), [](int64_t i, int64_t) { return 0.1f + static_cast<float>(i % 7); });
  const auto a = temp_path("a.gguf"), b = temp_path("b.gguf");
  llm::quantize_model(in, a.string(), options("IQ3_XXS", true, unit.string()));
  llm::quantize_model(in, b.string(), options("IQ3_XXS", true, ramp.string()));
  const gguf::File fa = gguf::File::open(a.string()), fb = gguf::File::open(b.string());
  const gguf::TensorInfo* ta = fa.find_tensor("blk.0.ffn_down.weight");
  const gguf::TensorInfo* tb = fb.find_tensor("blk.0.ffn_down.weight");
  const gguf::TensorInfo* t0 = model.find_tensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(ta && tb && t0);
  ASSERT_EQ(ta->dtype(), DType::IQ3_XXS);
  EXPECT_NE(0, std::memcmp(fa.tensor_data(*ta), fb.tensor_data(*tb), ta->nbytes));
  const int64_t n = t0->ne[0] * t0->ne[1];
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  std::memcpy(x.data(), model.tensor_data(*t0), x.size() * 4);
  for (const gguf::File* f : {&fa, &fb}) {
    const gguf::TensorInfo* t = f->find_tensor("blk.0.ffn_down.weight");
    to_f32_row(DType::IQ3_XXS, f->tensor_data(*t), y.data(), n);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
      num += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      den += double(x[i]) * x[i];
    }
    EXPECT_LT(num / den, 0.1);
  }
  for (const auto& p : {unit, ramp, a, b}) std::filesystem::remove(p);
}

TEST(QuantizeImatrix, CommandLine) {
  const std::string in = kOracle + "tiny-llama-f32.gguf";
  const auto imatrix = temp_path("cli.imatrix.gguf"), out = temp_path("cli-iq2_xxs.gguf");
  write_imatrix(imatrix, entries_of(gguf::File::open(in)), one);
  auto r = testing_support::run_cli("quantize " + in + " " + out.string() + " iq2_xxs -t 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("only with an importance matrix"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  // Q2_K needs one only in a Q2_K_S file (llama-quantize's rule); Q2_K takes it without.
  r = testing_support::run_cli("quantize " + in + " " + out.string() + " Q2_K_S -t 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("would be q2_K, which llama-quantize writes only with an importance matrix"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  r = testing_support::run_cli("quantize " + in + " " + out.string() + " Q2_K -t 2");
  EXPECT_EQ(r.code, 0) << r.out;
  std::filesystem::remove(out);
  r = testing_support::run_cli("quantize " + in + " " + out.string() + " iq2_xxs --pure -t 2 --imatrix " +
                               imatrix.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(read_all(out) == read_all(kOracle + "tiny-llama-iq2_xxs.gguf"));
  r = testing_support::run_cli("quantize " + in + " " + out.string() + " q4_k_m --imatrix /nonexistent.gguf");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.gguf"), std::string::npos) << r.out;
  std::filesystem::remove(out);
  std::filesystem::remove(imatrix);
}
