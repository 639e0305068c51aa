// `tessera chat-template`: the rendered prompt printed exactly, from a template file or a GGUF
// file's tokenizer.chat_template (BOS/EOS from its vocabulary), and clear errors for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli.h"
#include "tessera/gguf.h"

namespace {

namespace fs = std::filesystem;
using tessera::testing_support::run_cli;

const std::string kVocab = std::string(TESSERA_SHARED_DIR) + "/vocab/ggml-vocab-llama-spm.gguf";
const fs::path kFixtures = fs::path(TESSERA_FIXTURES_DIR) / "chat_templates";

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

class ChatCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_chat_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

  // A copy of a GGUF file with tokenizer.chat_template set (every key and tensor kept).
  std::string with_template(const std::string& src, const std::string& tmpl) {
    const auto file = tessera::gguf::File::open(src);
    tessera::gguf::Writer w;
    for (const auto& [k, v] : file.kvs()) w.set(k, v);
    w.set("tokenizer.chat_template", tmpl);
    for (const auto& t : file.tensors())
      w.add_tensor_raw(t.name, t.type_id, std::span<const int64_t>(t.ne.data(), t.n_dims),
                       file.tensor_data(t), t.nbytes);
    const std::string out = (dir_ / "with_template.gguf").string();
    w.write(out);
    return out;
  }

  fs::path dir_;
};

const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}{{ eos_token }}";

}  // namespace

TEST_F(ChatCli, RendersFromATemplateFile) {
  const std::string t = write("t.jinja", kTemplate);
  const std::string m = write("m.json", R"([{"role": "user", "content": "Hi, ünïcode!"}])");
  auto r = run_cli("chat-template --template " + t + " --messages " + m);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "[user] Hi, ünïcode!\n");
  r = run_cli("chat-template --template " + t + " --messages " + m +
              " --add-generation-prompt --bos-token '<s>' --eos-token '</s>'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "<s>[user] Hi, ünïcode!\n[assistant]</s>");
  // The object form carries the options; flags on the command line win.
  const std::string o = write("o.json", R"({"messages": [{"role": "system", "content": "S"}],
      "add_generation_prompt": true, "bos_token": "B", "eos_token": "E"})");
  r = run_cli("chat-template --template " + t + " --messages " + o);
  EXPECT_EQ(r.out, "B[system] S\n[assistant]E");
  r = run_cli("chat-template --template " + t + " --messages " + o + " --eos-token X");
  EXPECT_EQ(r.out, "B[system] S\n[assistant]X");
}

TEST_F(ChatCli, MatchesAFixtureExactly) {
  // The qwen3 fixture's system_user case, through the command.
  const std::string m =
      write("m.json", R"({"messages": [{"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "Hello! Who are you?"}], "add_generation_prompt": true})");
  const auto r =
      run_cli("chat-template --template " + (kFixtures / "qwen3.jinja").string() + " --messages " + m);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello! Who are "
            "you?<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(ChatCli, UsesTheGgufTemplateAndVocabularyTokens) {
  const std::string g = with_template(kVocab, kTemplate);
  const std::string m = write("m.json", R"([{"role": "user", "content": "x"}])");
  auto r = run_cli("chat-template -m " + g + " --messages " + m);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "<s>[user] x\n</s>");  // the llama-spm vocabulary's BOS and EOS texts
  r = run_cli("chat-template -m " + g + " --messages " + m + " --bos-token '' --eos-token ''");
  EXPECT_EQ(r.out, "[user] x\n");
}

TEST_F(ChatCli, BadInputIsAClearError) {
  const std::string t = write("t.jinja", kTemplate);
  const std::string m = write("m.json", R"([{"role": "user", "content": "x"}])");
  auto r = run_cli("chat-template -m " + kVocab + " --messages " + m);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.out, "no chat template (tokenizer.chat_template is missing)")) << r.out;
  r = run_cli("chat-template --messages " + m);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.out, "give either -m MODEL.gguf or --template FILE")) << r.out;
  r = run_cli("chat-template --template /nonexistent.jinja --messages " + m);
  EXPECT_TRUE(contains(r.out, "cannot open the template /nonexistent.jinja")) << r.out;
  r = run_cli("chat-template --template " + t + " --messages /nonexistent.json");
  EXPECT_TRUE(contains(r.out, "cannot open the messages file")) << r.out;
  for (const char* bad : {"[{\"role\": \"user\"", "{\"role\": \"user\"}", "[{\"content\": \"x\"}]", "[\"x\"]",
                          "{\"messages\": [], \"add_generation_prompt\": 1}"}) {
    r = run_cli("chat-template --template " + t + " --messages " + write("bad.json", bad));
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_TRUE(contains(r.out, "tessera: error:") && contains(r.out, "bad.json")) << bad << "\n" << r.out;
  }
  r = run_cli("chat-template --template " + write("b.jinja", "{% for %}") + " --messages " + m);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.out, "chat template: line 1, column 8")) << r.out;
}
