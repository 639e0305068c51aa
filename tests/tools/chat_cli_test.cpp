// `tessera chat-template`: the rendered prompt printed exactly, from a template file or a GGUF
// file's tokenizer.chat_template (BOS/EOS from its vocabulary), and clear errors for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"

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

// --- tessera run -cnv ---------------------------------------------------------------------------

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
// The conversation as one text: a story model continues whatever came before.
const char* kStoryTemplate = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";

// Runs a shell command line, stdout and stderr together.
tessera::testing_support::CliResult shell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string between(const std::string& s, const std::string& a, const std::string& b, size_t from = 0) {
  const size_t i = s.find(a, from);
  if (i == std::string::npos) return "";
  const size_t j = s.find(b, i + a.size());
  return s.substr(i + a.size(), j == std::string::npos ? std::string::npos : j - i - a.size());
}

}  // namespace

TEST_F(ChatCli, ConversationKeepsTheCacheAcrossTurns) {
  const std::string t = write("story.jinja", kStoryTemplate);
  const std::string cli = std::string(TESSERA_CLI) + " run -m " + kModel + " -cnv --chat-template-file " + t +
                          " -n 24 --temp 0 -t 2";
  const auto r = shell("printf 'Once upon a time\\n The end.\\n/exit\\nnot read\\n' | " + cli);
  ASSERT_EQ(r.code, 0) << r.out;
  // Turn 1 is the prompt `tessera run` greedily continues with the known story (24 tokens of it).
  EXPECT_TRUE(contains(r.out, "> , there was a little girl named Lily. She loved to play outside in the p\n"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "[turn 1: 5 prompt tokens, 0 cached, 5 evaluated]")) << r.out;
  // Turn 2 evaluates only what follows the cached prefix (the first reply is in the cache).
  const std::string turn2 = between(r.out, "[turn 2: ", "]");
  int total = 0, cached = 0, evaluated = 0;
  ASSERT_EQ(
      std::sscanf(turn2.c_str(), "%d prompt tokens, %d cached, %d evaluated", &total, &cached, &evaluated), 3)
      << r.out;
  EXPECT_EQ(cached + evaluated, total);
  EXPECT_GE(cached, 5 + 20) << r.out;  // the first prompt and nearly all of its reply
  EXPECT_LE(evaluated, 8) << r.out;
  EXPECT_FALSE(contains(r.out, "not read"));
  // The second reply equals a fresh greedy run on the whole conversation's text.
  const std::string reply1 = between(r.out, "> ", "\n");
  const size_t second = r.out.find("\n> ", r.out.find("[turn 1"));
  ASSERT_NE(second, std::string::npos) << r.out;
  std::string tail = r.out.substr(second + 3);
  tail = tail.substr(0, tail.find('\n'));
  const std::string text = "Once upon a time" + reply1 + " The end.";
  const auto fresh = run_cli("run -m " + kModel + " -p '" + text + "' -n 24 --temp 0 -t 2");
  ASSERT_EQ(fresh.code, 0) << fresh.out;
  EXPECT_TRUE(contains(fresh.out, text + tail)) << "chat:  " << tail << "\nfresh: " << fresh.out;
}

TEST_F(ChatCli, ConversationReadsTypedControlTokensAsText) {
  const std::string t = write("story.jinja", kStoryTemplate);
  const auto r = shell("printf '</s></s>\\n/exit\\n' | " + std::string(TESSERA_CLI) + " run -m " + kModel +
                       " -cnv --chat-template-file " + t + " -n 1 --temp 0 -t 2");
  ASSERT_EQ(r.code, 0) << r.out;
  // The template's BOS, then the typed text as text (not two EOS tokens).
  const auto vocab = tessera::llm::Vocab::from_gguf(tessera::gguf::File::open(kModel));
  const size_t typed = vocab.encode("</s></s>", false, /*parse_special=*/false).size();
  ASSERT_GT(typed, 2u);
  EXPECT_TRUE(contains(r.out, "[turn 1: " + std::to_string(1 + typed) + " prompt tokens")) << r.out;
}

TEST_F(ChatCli, ConversationUsesTheFilesTemplateAndEndsAtEof) {
  const std::string g = with_template(kModel, kStoryTemplate);
  const auto r = shell("printf 'Once upon a time\\n' | " + std::string(TESSERA_CLI) + " run -m " + g +
                       " --chat -sys 'Lily' -n 8 --temp 0 -t 2");
  ASSERT_EQ(r.code, 0) << r.out;
  // The system message is part of the text: "<s>Lily" + "Once upon a time".
  EXPECT_TRUE(contains(r.out, "[turn 1: ")) << r.out;  // turns count the user's, not the system message
  EXPECT_FALSE(contains(r.out, "[turn 2: ")) << r.out;
  EXPECT_TRUE(contains(r.out, "> ")) << r.out;
}

TEST_F(ChatCli, ConversationWithoutATemplateIsAClearError) {
  const auto r = shell("printf 'hi\\n' | " + std::string(TESSERA_CLI) + " run -m " + kModel + " -cnv");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(
      contains(r.out, "has no chat template (tokenizer.chat_template): give one with --chat-template-file"))
      << r.out;
  const auto bad = shell("printf 'hi\\n' | " + std::string(TESSERA_CLI) + " run -m " + kModel +
                         " -cnv --chat-template-file " + write("bad.jinja", "{% if %}"));
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_TRUE(contains(bad.out, "chat template: line 1")) << bad.out;
  const auto no_prompt = run_cli("run -m " + kModel);
  EXPECT_EQ(no_prompt.code, 1);
  EXPECT_TRUE(contains(no_prompt.out, "give a prompt with -p, or chat with -cnv")) << no_prompt.out;
}
