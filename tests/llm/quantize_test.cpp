// The quantizer (tessera/llm/quantize.h): llama-quantize's own outputs of tiny-llama-f32.gguf
// (../shared/models/oracle: --pure per type, Q4_K_M and Q5_K_M) must come out byte for byte; the
// per-tensor choices on a synthetic 32-layer file follow llama.cpp's rules computed by hand; bad
// input is an Error and never leaves a partial output.
#include "tessera/llm/quantize.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/cli.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

const std::string kOracle = std::string(TESSERA_SHARED_DIR) + "/models/oracle/";

std::filesystem::path temp_path(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_quantize_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::vector<char> read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string type_of(uint32_t id) { return std::string(gguf::ggml_type(id)->name); }

// name -> type of every tensor a plan writes.
std::map<std::string, std::string> plan_types(const std::vector<llm::TensorPlan>& plan) {
  std::map<std::string, std::string> m;
  for (const auto& p : plan) m[p.name] = type_of(p.to_type_id);
  return m;
}

// A Llama-shaped file of n_layer blocks with tiny rows (n_embd 256, one row each except where the
// test wants a width), enough for the type choices, which read names, layers and ne[0].
gguf::File synthetic(std::vector<std::byte>& bytes, int n_layer, int n_head, int n_head_kv, bool with_output,
                     int64_t odd_width = 0) {
  gguf::Writer w;
  w.set("general.architecture", std::string("llama"));
  w.set("llama.block_count", static_cast<uint32_t>(n_layer));
  w.set("llama.attention.head_count", static_cast<uint32_t>(n_head));
  w.set("llama.attention.head_count_kv", static_cast<uint32_t>(n_head_kv));
  std::vector<float> zeros(256 * 2, 0.0f);
  auto add = [&](const std::string& name, std::vector<int64_t> ne) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    if (static_cast<size_t>(n) > zeros.size()) zeros.resize(static_cast<size_t>(n));
    w.add_tensor(name, DType::F32, ne, zeros.data(), static_cast<size_t>(n) * 4);
  };
  add("token_embd.weight", {256, 2});
  add("output_norm.weight", {256});
  if (with_output) add("output.weight", {256, 2});
  if (odd_width > 0) add("odd.weight", {odd_width, 2});
  const char* mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", {256});
    add(b + "ffn_norm.weight", {256});
    for (const char* m : mats) add(b + m + ".weight", {256, 2});
  }
  bytes = w.to_bytes();
  return gguf::File::parse(bytes);
}

llm::QuantizeOptions options(const std::string& type, bool pure = false) {
  llm::QuantizeOptions o;
  o.type = type;
  o.pure = pure;
  o.threads = 2;
  return o;
}

}  // namespace

TEST(Quantize, FileTypesAndNames) {
  EXPECT_EQ(llm::file_type("q4_k_m").ftype, 15u);
  EXPECT_EQ(llm::file_type("Q4_K").ftype, 15u);  // llama-quantize's alias
  EXPECT_EQ(llm::file_type("q3_k").ftype, 12u);
  EXPECT_EQ(llm::file_type("Q5_K").ftype, 17u);
  EXPECT_EQ(llm::file_type("q8_0").ftype, 7u);
  EXPECT_EQ(llm::file_type("IQ4_xs").ftype, 30u);
  EXPECT_EQ(llm::file_type("bf16").ftype, 32u);
  EXPECT_EQ(llm::file_type("F32").ftype, 0u);
  EXPECT_EQ(llm::file_type("q2_k").base, DType::Q2_K);
  EXPECT_THROW(llm::file_type("q4_k_x"), Error);
  EXPECT_THROW(llm::file_type("iq2_xxxs"), Error);
  EXPECT_EQ(llm::tensor_type("Q6_K"), DType::Q6_K);
  EXPECT_EQ(llm::tensor_type("iq4_nl"), DType::IQ4_NL);
  EXPECT_THROW(llm::tensor_type("q8_k"), Error);
  EXPECT_THROW(llm::tensor_type("q4_k_m"), Error);
}

TEST(Quantize, SameBytesAsLlamaQuantize) {
  // llama-quantize [--pure] tiny-llama-f32.gguf OUT TYPE wrote these files: ours must equal them,
  // header, metadata order, tensor order, types, blocks and padding.
  const struct {
    const char* file;
    const char* type;
    bool pure;
  } cases[] = {{"q4_k_m", "Q4_K_M", false}, {"q5_k_m", "Q5_K_M", false}, {"q2_k", "q2_k", true},
               {"q3_k", "q3_k", true},      {"q4_k", "Q4_K", true},      {"q5_k", "q5_k", true},
               {"q6_k", "q6_k", true},      {"iq4_nl", "iq4_nl", true},  {"q4_1", "q4_1", true},
               {"q5_0", "q5_0", true},      {"q5_1", "q5_1", true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const auto out = temp_path(std::string("ours-") + c.file + ".gguf");
    llm::quantize_model(kOracle + "tiny-llama-f32.gguf", out.string(), options(c.type, c.pure));
    const auto ours = read_all(out);
    const auto theirs = read_all(kOracle + "tiny-llama-" + c.file + ".gguf");
    EXPECT_EQ(ours.size(), theirs.size());
    EXPECT_TRUE(ours == theirs)
        << "first difference at byte "
        << std::mismatch(ours.begin(), ours.end(), theirs.begin(), theirs.end()).first - ours.begin();
    std::filesystem::remove(out);
  }
}

TEST(Quantize, Mxfp4MoeIsLlamaQuantizesFtype38) {
  // peer-bench quantize tiny-gptoss-f32.gguf OUT 38 (llama-quantize's MXFP4_MOE) wrote
  // tiny-gptoss-mxfp4.gguf: the 3-D expert tensors in MXFP4, every other matrix (token_embd and
  // output too) in Q8_0, the router and biases as they were. Ours must be the same bytes.
  EXPECT_EQ(llm::file_type("mxfp4_moe").ftype, 38u);
  EXPECT_EQ(llm::tensor_type("MXFP4"), DType::MXFP4);
  const auto out = temp_path("ours-gptoss-mxfp4.gguf");
  llm::quantize_model(kOracle + "tiny-gptoss-f32.gguf", out.string(), options("MXFP4_MOE"));
  const auto ours = read_all(out);
  const auto theirs = read_all(kOracle + "tiny-gptoss-mxfp4.gguf");
  EXPECT_EQ(ours.size(), theirs.size());
  EXPECT_TRUE(ours == theirs) << "first difference at byte "
                              << std::mismatch(ours.begin(), ours.end(), theirs.begin(), theirs.end()).first -
                                     ours.begin();
  std::filesystem::remove(out);
}

TEST(Quantize, Q4_K_MChoosesLlamaQuantizesTypes) {
  // The plan alone against the oracle file's types (names the tensor that differs).
  for (const char* mix : {"q4_k_m", "q5_k_m"}) {
    SCOPED_TRACE(mix);
    const gguf::File in = gguf::File::open(kOracle + "tiny-llama-f32.gguf");
    const gguf::File theirs = gguf::File::open(kOracle + "tiny-llama-" + mix + ".gguf");
    const auto plan = llm::plan_quantization(in, options(mix));
    ASSERT_EQ(plan.size(), theirs.tensors().size());
    for (size_t i = 0; i < plan.size(); ++i) {
      EXPECT_EQ(plan[i].name, theirs.tensors()[i].name) << i;
      EXPECT_EQ(type_of(plan[i].to_type_id), type_of(theirs.tensors()[i].type_id)) << plan[i].name;
    }
  }
}

TEST(Quantize, MixesOn32LayersFollowLlamaCppsRules) {
  std::vector<std::byte> bytes;
  const gguf::File f = synthetic(bytes, 32, 32, 8, true);  // n_gqa 4
  // use_more_bits for 32 layers: the first and last 4, and 6, 9, ..., 27.
  const std::set<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  auto layer = [](int i, const char* m) { return "blk." + std::to_string(i) + "." + m + ".weight"; };
  struct Expect {
    const char* mix;
    std::string (*attn_v)(int, const std::set<int>&);
    std::string (*ffn_down)(int, const std::set<int>&);
    const char* attn_output;
    const char* other;
    const char* output;
  };
  const Expect cases[] = {
      {"Q4_K_M", [](int i, const std::set<int>& m) { return std::string(m.count(i) ? "q6_K" : "q4_K"); },
       [](int i, const std::set<int>& m) { return std::string(m.count(i) ? "q6_K" : "q4_K"); }, "q4_K",
       "q4_K", "q6_K"},
      {"Q5_K_M", [](int i, const std::set<int>& m) { return std::string(m.count(i) ? "q6_K" : "q5_K"); },
       [](int i, const std::set<int>& m) { return std::string(m.count(i) ? "q6_K" : "q5_K"); }, "q5_K",
       "q5_K", "q6_K"},
      {"Q4_K_S", [](int i, const std::set<int>&) { return std::string(i < 4 ? "q5_K" : "q4_K"); },
       [](int i, const std::set<int>&) { return std::string(i < 4 ? "q5_K" : "q4_K"); }, "q4_K", "q4_K",
       "q6_K"},
      {"Q5_K_S", [](int, const std::set<int>&) { return std::string("q5_K"); },
       [](int, const std::set<int>&) { return std::string("q5_K"); }, "q5_K", "q5_K", "q6_K"},
      {"Q3_K_S", [](int, const std::set<int>&) { return std::string("q3_K"); },
       [](int, const std::set<int>&) { return std::string("q3_K"); }, "q3_K", "q3_K", "q6_K"},
      {"Q3_K_M", [](int i, const std::set<int>&) { return std::string(i < 2 ? "q5_K" : "q4_K"); },
       [](int i, const std::set<int>&) { return std::string(i < 2 ? "q5_K" : "q4_K"); }, "q4_K", "q3_K",
       "q6_K"},
      {"Q3_K_L", [](int, const std::set<int>&) { return std::string("q5_K"); },
       [](int, const std::set<int>&) { return std::string("q5_K"); }, "q5_K", "q3_K", "q6_K"},
      {"Q2_K", [](int, const std::set<int>&) { return std::string("q4_K"); },  // n_gqa >= 4
       [](int, const std::set<int>&) { return std::string("q3_K"); }, "q3_K", "q2_K", "q6_K"},
      {"Q6_K", [](int, const std::set<int>&) { return std::string("q6_K"); },
       [](int, const std::set<int>&) { return std::string("q6_K"); }, "q6_K", "q6_K", "q6_K"},
      {"IQ4_XS", [](int, const std::set<int>&) { return std::string("q5_K"); },  // n_gqa >= 4
       [](int i, const std::set<int>&) { return std::string(i < 4 ? "q5_K" : "iq4_xs"); }, "iq4_xs", "iq4_xs",
       "q6_K"},
      {"Q8_0", [](int, const std::set<int>&) { return std::string("q8_0"); },
       [](int, const std::set<int>&) { return std::string("q8_0"); }, "q8_0", "q8_0", "q8_0"},
      {"Q4_0", [](int, const std::set<int>&) { return std::string("q4_0"); },
       [](int, const std::set<int>&) { return std::string("q4_0"); }, "q4_0", "q4_0", "q6_K"},
      {"F16", [](int, const std::set<int>&) { return std::string("f16"); },
       [](int, const std::set<int>&) { return std::string("f16"); }, "f16", "f16", "f16"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mix);
    const auto t = plan_types(llm::plan_quantization(f, options(c.mix)));
    EXPECT_EQ(t.at("output.weight"), c.output);
    EXPECT_EQ(t.at("token_embd.weight"), std::string(c.other));
    EXPECT_EQ(t.at("output_norm.weight"), "f32");
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(t.at(layer(i, "attn_v")), c.attn_v(i, more)) << i;
      EXPECT_EQ(t.at(layer(i, "ffn_down")), c.ffn_down(i, more)) << i;
      EXPECT_EQ(t.at(layer(i, "attn_output")), c.attn_output) << i;
      for (const char* m : {"attn_q", "attn_k", "ffn_gate", "ffn_up"})
        EXPECT_EQ(t.at(layer(i, m)), c.other) << i;
      EXPECT_EQ(t.at(layer(i, "attn_norm")), "f32");
    }
  }
  // n_gqa 1: Q2_K's attn_v is Q3_K, IQ4_XS's is not raised.
  const gguf::File mha = synthetic(bytes, 32, 8, 8, true);
  EXPECT_EQ(plan_types(llm::plan_quantization(mha, options("Q2_K"))).at(layer(5, "attn_v")), "q3_K");
  EXPECT_EQ(plan_types(llm::plan_quantization(mha, options("IQ4_XS"))).at(layer(5, "attn_v")), "iq4_xs");
}

TEST(Quantize, TiedEmbeddingsOverridesAndFallbacks) {
  std::vector<std::byte> bytes;
  {
    // No output.weight: token_embd is the output and gets its Q6_K.
    const gguf::File f = synthetic(bytes, 8, 8, 8, false);
    EXPECT_EQ(plan_types(llm::plan_quantization(f, options("Q4_K_M"))).at("token_embd.weight"), "q6_K");
    auto o = options("Q4_K_M");
    o.output_type = DType::Q8_0;
    EXPECT_EQ(plan_types(llm::plan_quantization(f, o)).at("token_embd.weight"), "q8_0");
  }
  {
    const gguf::File f = synthetic(bytes, 8, 8, 8, true);
    auto o = options("Q4_K_M", /*pure=*/true);
    o.output_type = DType::Q8_0;
    o.token_embedding_type = DType::F16;
    const auto t = plan_types(llm::plan_quantization(f, o));
    EXPECT_EQ(t.at("output.weight"), "q8_0");
    EXPECT_EQ(t.at("token_embd.weight"), "f16");
    EXPECT_EQ(t.at("blk.7.ffn_down.weight"), "q4_K");  // --pure: no per-layer choice
    EXPECT_EQ(t.at("blk.7.attn_v.weight"), "q4_K");
  }
  // Rows of 320: K-quants fall back to their 32-element relatives; rows of 48 to f16.
  const struct {
    const char* mix;
    int64_t width;
    const char* expect;
  } fallbacks[] = {{"Q4_K_S", 320, "q5_0"},   {"Q5_K_S", 320, "q5_1"}, {"Q6_K", 320, "q8_0"},
                   {"Q3_K_S", 320, "iq4_nl"}, {"Q2_K", 320, "iq4_nl"}, {"IQ4_XS", 320, "iq4_nl"},
                   {"Q4_K_M", 48, "f16"},     {"Q6_K", 48, "f16"}};
  for (const auto& c : fallbacks) {
    SCOPED_TRACE(std::string(c.mix) + " " + std::to_string(c.width));
    const gguf::File f = synthetic(bytes, 8, 8, 8, true, c.width);
    EXPECT_EQ(plan_types(llm::plan_quantization(f, options(c.mix))).at("odd.weight"), c.expect);
    // --pure has no fallback: a clear error naming the tensor.
    try {
      (void)llm::plan_quantization(f, options(c.mix, true));
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("odd.weight"), std::string::npos) << e.what();
    }
  }
  // Q8_0 on rows of 48: llama.cpp has no fallback for the 32-element types either.
  const gguf::File f = synthetic(bytes, 8, 8, 8, true, 48);
  EXPECT_THROW((void)llm::plan_quantization(f, options("Q8_0")), Error);
}

TEST(Quantize, QuantizedSourcesAreAnErrorNeverRequantized) {
  const auto out = temp_path("requant.gguf");
  try {
    llm::quantize_model(kOracle + "tiny-llama-q4_k.gguf", out.string(), options("Q8_0"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("q4_K"), std::string::npos) << m;
    EXPECT_NE(m.find(".weight"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  // The same type throughout is a copy, not a re-quantization: the file comes back as it was
  // (llama-quantize's own output of a pure Q4_K has file type Q4_K_M, as this one).
  llm::quantize_model(kOracle + "tiny-llama-q4_k.gguf", out.string(), options("q4_k", true));
  EXPECT_TRUE(read_all(out) == read_all(kOracle + "tiny-llama-q4_k.gguf"));
  std::filesystem::remove(out);
}

TEST(Quantize, FailuresLeaveNoOutputAndTheInputUntouched) {
  const std::string in = kOracle + "tiny-llama-f32.gguf";
  const auto before = read_all(in);
  const auto out = temp_path("failure.gguf");
  // A failure while tensors are written (here: the progress callback, on the fifth tensor).
  EXPECT_THROW(llm::quantize_model(in, out.string(), options("Q4_K_M"),
                                   [](const llm::QuantizeProgress& p) {
                                     if (p.index == 5) throw Error(ErrorCode::Io, "disk full");
                                   }),
               Error);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out.string() + ".tmp"));
  // An existing output is replaced only by a complete file.
  { std::ofstream(out) << "previous"; }
  EXPECT_THROW(llm::quantize_model(in, out.string(), options("Q4_K_M"),
                                   [](const llm::QuantizeProgress& p) {
                                     if (p.index == 2) throw Error(ErrorCode::Io, "disk full");
                                   }),
               Error);
  const auto kept = read_all(out);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "previous");
  std::filesystem::remove(out);
  EXPECT_THROW(llm::quantize_model(in, in, options("Q4_K_M")), Error);
  EXPECT_THROW(llm::quantize_model(in, kOracle + "../oracle/tiny-llama-f32.gguf", options("Q4_K_M")), Error);
  EXPECT_THROW(llm::quantize_model("/nonexistent/in.gguf", out.string(), options("Q4_K_M")), Error);
  EXPECT_THROW(llm::quantize_model(in, "/nonexistent-dir/out.gguf", options("Q4_K_M")), Error);
  EXPECT_THROW(llm::quantize_model(in, out.string(), options("Q4_K_Z")), Error);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_TRUE(read_all(in) == before);
}

TEST(Quantize, Float16SourcesAndThreadCounts) {
  // f32 -> f16 -> q4_K equals quantizing the f16-rounded weights directly, for any thread count.
  const std::string in = kOracle + "tiny-llama-f32.gguf";
  const auto f16 = temp_path("tiny-f16.gguf");
  llm::quantize_model(in, f16.string(), options("F16"));
  const gguf::File half = gguf::File::open(f16.string());
  EXPECT_EQ(half.get_u32("general.file_type"), 1u);
  EXPECT_EQ(half.find_tensor("blk.0.ffn_up.weight")->type, DType::F16);
  EXPECT_EQ(half.find_tensor("blk.0.ffn_norm.weight")->type, DType::F32);
  std::vector<char> first;
  for (int threads : {1, 3}) {
    const auto out = temp_path("from-f16.gguf");
    auto o = options("q4_k", true);
    o.threads = threads;
    llm::quantize_model(f16.string(), out.string(), o);
    const gguf::File q = gguf::File::open(out.string());
    const gguf::TensorInfo& t = *q.find_tensor("blk.1.ffn_down.weight");
    const gguf::TensorInfo& s = *half.find_tensor("blk.1.ffn_down.weight");
    const int64_t n = t.ne[0] * t.ne[1];
    std::vector<float> x(static_cast<size_t>(n));
    to_f32_row(DType::F16, half.tensor_data(s), x.data(), n);
    std::vector<std::byte> expect(t.nbytes);
    quantize_weights(DType::Q4_K, x.data(), expect.data(), n);
    EXPECT_EQ(std::memcmp(q.tensor_data(t), expect.data(), t.nbytes), 0) << threads << " threads";
    if (first.empty())
      first = read_all(out);
    else
      EXPECT_TRUE(read_all(out) == first) << "thread counts disagree";
    std::filesystem::remove(out);
  }
  std::filesystem::remove(f16);
}

TEST(Quantize, CommandLine) {
  const auto out = temp_path("cli.gguf");
  const auto r = testing_support::run_cli("quantize " + kOracle + "tiny-llama-f32.gguf " + out.string() +
                                          " q4_k_m -t 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[ 1/21] output.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.1.attn_v.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> q6_K"), std::string::npos) << r.out;
  EXPECT_TRUE(read_all(out) == read_all(kOracle + "tiny-llama-q4_k_m.gguf"));
  const auto bad =
      testing_support::run_cli("quantize " + kOracle + "tiny-llama-f32.gguf " + out.string() + " q9_9");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("unknown quantization type 'q9_9'"), std::string::npos) << bad.out;
  const auto same = testing_support::run_cli("quantize " + out.string() + " " + out.string() + " q8_0");
  EXPECT_NE(same.code, 0);
  EXPECT_NE(same.out.find("is the input file"), std::string::npos) << same.out;
  const auto requant = testing_support::run_cli("quantize " + out.string() + " " + out.string() + "2 q8_0");
  EXPECT_NE(requant.code, 0);
  EXPECT_NE(requant.out.find("only f32, f16 and bf16"), std::string::npos) << requant.out;
  EXPECT_FALSE(std::filesystem::exists(out.string() + "2"));
  std::filesystem::remove(out);
}
