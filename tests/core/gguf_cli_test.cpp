// `tessera gguf`: the dump of real files (text and JSON), errors, and --load.
#include <gtest/gtest.h>

#include <memory>
#include <variant>

#include "core/gguf_test_util.h"
#include "tessera/gguf.h"

namespace tessera::gguf {
namespace {

// A small JSON reader, strict enough to reject malformed output: objects, arrays, strings with
// escapes, numbers, true/false/null.
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<Json>,
               std::vector<std::pair<std::string, Json>>>
      v;
  const Json& operator[](const std::string& key) const {
    for (const auto& [k, j] : std::get<5>(v))
      if (k == key) return j;
    throw std::runtime_error("no key " + key);
  }
  const Json& operator[](size_t i) const { return std::get<4>(v).at(i); }
  size_t size() const { return v.index() == 4 ? std::get<4>(v).size() : std::get<5>(v).size(); }
  double num() const { return std::get<2>(v); }
  const std::string& str() const { return std::get<3>(v); }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}
  Json document() {
    Json j = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON error at " + std::to_string(i_) + ": " + what);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected ") + c);
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = s_.at(i_++);
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          const unsigned cp = std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16);
          i_ += 4;
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
  Json value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      std::vector<std::pair<std::string, Json>> members;
      if (!eat('}')) {
        do {
          std::string k = string();
          expect(':');
          members.emplace_back(std::move(k), value());
        } while (eat(','));
        expect('}');
      }
      return Json{std::move(members)};
    }
    if (c == '[') {
      ++i_;
      std::vector<Json> items;
      if (!eat(']')) {
        do items.push_back(value());
        while (eat(','));
        expect(']');
      }
      return Json{std::move(items)};
    }
    if (c == '"') return Json{string()};
    for (const auto& [word, j] : {std::pair<std::string_view, Json>{"true", Json{true}},
                                  {"false", Json{false}},
                                  {"null", Json{nullptr}}})
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return j;
      }
    size_t used = 0;
    const std::string rest(s_.substr(i_, 64));
    const double d = std::stod(rest, &used);
    if (used == 0 || !(rest[0] == '-' || std::isdigit(static_cast<unsigned char>(rest[0]))))
      fail("bad value");
    i_ += used;
    return Json{d};
  }
  std::string_view s_;
  size_t i_ = 0;
};

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
  const Json j = JsonParser(r.out).document();
  const File f = File::open(shared("/models/stories260K.gguf"));
  EXPECT_EQ(j["version"].num(), 3);
  EXPECT_EQ(j["file_size"].num(), 1185376);
  EXPECT_EQ(j["alignment"].num(), 32);
  ASSERT_EQ(j["kvs"].size(), 19u);
  ASSERT_EQ(j["tensors"].size(), 48u);
  const Json& tokens = j["kvs"][0];
  EXPECT_EQ(tokens["key"].str(), "tokenizer.ggml.tokens");
  EXPECT_EQ(tokens["element_type"].str(), "string");
  EXPECT_EQ(tokens["length"].num(), 512);
  EXPECT_EQ(tokens["value"][1].str(), "<s>");
  size_t total = 0;
  for (size_t i = 0; i < 48; ++i) {
    const Json& t = j["tensors"][i];
    const TensorInfo& info = f.tensors()[i];
    EXPECT_EQ(t["name"].str(), info.name);
    EXPECT_EQ(t["type"].str(), "f32");
    EXPECT_EQ(t["offset"].num(), static_cast<double>(info.offset));
    EXPECT_EQ(t["bytes"].num(), static_cast<double>(info.nbytes));
    double elements = 1;
    for (size_t d = 0; d < t["shape"].size(); ++d) elements *= t["shape"][d].num();
    EXPECT_EQ(elements * 4, t["bytes"].num());
    total += info.nbytes;
  }
  EXPECT_EQ(j["data_offset"].num() + static_cast<double>(total), 1185376);

  // The vocabulary (non-ASCII tokens included) is valid JSON too, in full with --full.
  const auto v = testing::run_cli("gguf --json --full " +
                                  testing::shell_quote(shared("/vocab/ggml-vocab-llama-spm.gguf")));
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const Json vj = JsonParser(v.out).document();
  const Json* toks = nullptr;
  for (size_t i = 0; i < vj["kvs"].size(); ++i)
    if (vj["kvs"][i]["key"].str() == "tokenizer.ggml.tokens") toks = &vj["kvs"][i]["value"];
  ASSERT_NE(toks, nullptr);
  ASSERT_EQ(toks->size(), 32000u);
  EXPECT_EQ((*toks)[259].str(), "\xe2\x96\x81\xe2\x96\x81");
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
  const Json j = JsonParser(r.out).document();
  EXPECT_EQ(j["kvs"][0]["value"].str(),
            "a\"b\\c\n\x01\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
  EXPECT_EQ(j["kvs"][2]["value"].str(), "nan");
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
