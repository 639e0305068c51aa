// `tessera gguf`: the dump of real files (text and JSON), errors, and --load.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "core/gguf_test_util.h"
#include "tessera/gguf.h"

namespace tessera::gguf {
namespace {

// The output is parsed by nlohmann-json, which rejects malformed documents and invalid UTF-8.
using Json = nlohmann::json;

std::string shared(const char* rel) { return std::string(TESSERA_SHARED_DIR) + rel; }
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GgufCli, DumpsStories260K) {
  const auto r = testing::run_cli("gguf " + testing::shell_quote(shared("/models/stories260K.gguf")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "GGUF v3: ")) << r.out;
  EXPECT_TRUE(has(r.out, "(1185376 bytes)"));
  EXPECT_TRUE(has(r.out, "19 key/value pairs:"));
  EXPECT_TRUE(has(r.out, "u32       llama.block_count = 5\n"));
  EXPECT_TRUE(has(r.out, "string    general.architecture = \"llama\"\n"));
  EXPECT_TRUE(has(r.out, "[string]  tokenizer.ggml.tokens = [\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\""));
  EXPECT_TRUE(has(r.out, ", ...] (512 items)\n"));
  EXPECT_TRUE(has(r.out, "48 tensors:"));
  // One line per tensor with type, shape, offset and bytes.
  EXPECT_TRUE(has(r.out, "token_embd.weight"));
  EXPECT_TRUE(has(r.out, "blk.4.ffn_norm.weight"));
  size_t lines = 0;
  for (size_t p = r.out.find(".weight  "); p != std::string::npos; p = r.out.find(".weight  ", p + 1))
    ++lines;
  EXPECT_EQ(lines, 48u);
}

TEST(GgufCli, DumpsTheVocabulary) {
  const auto r = testing::run_cli("gguf " + testing::shell_quote(shared("/vocab/ggml-vocab-llama-spm.gguf")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "21 key/value pairs:"));
  EXPECT_TRUE(has(r.out, "tokenizer.ggml.tokens = [\"<unk>\", \"<s>\", \"</s>\""));
  EXPECT_TRUE(has(r.out, "(32000 items)"));
  EXPECT_TRUE(has(r.out, "bool      tokenizer.ggml.add_bos_token = true\n"));
  EXPECT_TRUE(has(r.out, "0 tensors:"));
}

TEST(GgufCli, JsonIsOneDocumentWithEverything) {
  const auto r = testing::run_cli("gguf --json " + testing::shell_quote(shared("/models/stories260K.gguf")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  const File f = File::open(shared("/models/stories260K.gguf"));
  EXPECT_EQ(j.at("version").get<double>(), 3);
  EXPECT_EQ(j.at("file_size").get<double>(), 1185376);
  EXPECT_EQ(j.at("alignment").get<double>(), 32);
  ASSERT_EQ(j.at("kvs").size(), 19u);
  ASSERT_EQ(j.at("tensors").size(), 48u);
  const Json& tokens = j.at("kvs").at(0);
  EXPECT_EQ(tokens.at("key").get<std::string>(), "tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.at("element_type").get<std::string>(), "string");
  EXPECT_EQ(tokens.at("length").get<double>(), 512);
  EXPECT_EQ(tokens.at("value").at(1).get<std::string>(), "<s>");
  size_t total = 0;
  for (size_t i = 0; i < 48; ++i) {
    const Json& t = j.at("tensors").at(i);
    const TensorInfo& info = f.tensors().at(i);
    EXPECT_EQ(t.at("name").get<std::string>(), info.name);
    EXPECT_EQ(t.at("type").get<std::string>(), "f32");
    EXPECT_EQ(t.at("offset").get<double>(), static_cast<double>(info.offset));
    EXPECT_EQ(t.at("bytes").get<double>(), static_cast<double>(info.nbytes));
    double elements = 1;
    for (size_t d = 0; d < t.at("shape").size(); ++d) elements *= t.at("shape").at(d).get<double>();
    EXPECT_EQ(elements * 4, t.at("bytes").get<double>());
    total += info.nbytes;
  }
  EXPECT_EQ(j.at("data_offset").get<double>() + static_cast<double>(total), 1185376);

  // The vocabulary (non-ASCII tokens included) is valid JSON too, in full with --full.
  const auto v = testing::run_cli("gguf --json --full " +
                                  testing::shell_quote(shared("/vocab/ggml-vocab-llama-spm.gguf")));
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const Json vj = Json::parse(v.out);
  const Json* toks = nullptr;
  for (size_t i = 0; i < vj.at("kvs").size(); ++i)
    if (vj.at("kvs").at(i).at("key").get<std::string>() == "tokenizer.ggml.tokens")
      toks = &vj.at("kvs").at(i).at("value");
  ASSERT_NE(toks, nullptr);
  ASSERT_EQ(toks->size(), 32000u);
  EXPECT_EQ((*toks).at(259).get<std::string>(), "\xe2\x96\x81\xe2\x96\x81");
}

// Strings that are not valid UTF-8 or hold control characters stay valid JSON.
TEST(GgufCli, HostileStringsStayValidJson) {
  Writer w;
  w.set("weird", std::string("a\"b\\c\n\x01\xff\xc3(\xed\xa0\x80z", 14));
  w.set("list", ArrayValue::of(std::vector<std::string>{"\x7f", "ok"}));
  w.set("nan", std::numeric_limits<float>::quiet_NaN());
  const auto path = testing::temp_dir() / "hostile_strings.gguf";
  w.write(path.string());
  const auto r = testing::run_cli("gguf --json " + testing::shell_quote(path.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j.at("kvs").at(0).at("value").get<std::string>(),
            "a\"b\\c\n\x01\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
  EXPECT_EQ(j.at("kvs").at(2).at("value").get<std::string>(), "nan");
  const auto t = testing::run_cli("gguf " + testing::shell_quote(path.string()));
  EXPECT_TRUE(has(t.out, "weird = \"a\\\"b\\\\c\\n\\x01\\xff\\xc3(\\xed\\xa0\\x80z\"")) << t.out;
  std::filesystem::remove(path);
}

TEST(GgufCli, MissingFileIsAnError) {
  const auto r = testing::run_cli("gguf /nonexistent/model.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "tessera: error: cannot open /nonexistent/model.gguf")) << r.err;
}

TEST(GgufCli, LoadsOntoTheCpuAndVerifies) {
  const auto r =
      testing::run_cli("gguf --load CPU " + testing::shell_quote(shared("/models/stories260K.gguf")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "loaded 48 tensors (1.12 MiB) into CPU")) << r.out;
  EXPECT_TRUE(has(r.out, "read back identical"));
  const auto bad = testing::run_cli("gguf --load NoSuchDevice " +
                                    testing::shell_quote(shared("/models/stories260K.gguf")));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(has(bad.err, "tessera: error: "));
}

}  // namespace
}  // namespace tessera::gguf
