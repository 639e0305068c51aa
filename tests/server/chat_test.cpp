// The server's chat prompts (server/chat.h) on stories260K with the test template: a message's
// text never becomes a control token, the prompt has exactly one BOS, and deep JSON is a 400.
#include "server/chat.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "server/api.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"

namespace {

using tessera::llm::Token;
using Ids = std::vector<Token>;

struct Stories {
  tessera::gguf::File file =
      tessera::gguf::File::open(std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf");
  tessera::llm::Vocab vocab = tessera::llm::Vocab::from_gguf(file);
  tessera::server::ChatFormatter chat = tessera::server::ChatFormatter::create(
      file, vocab, std::string(TESSERA_SOURCE_DIR) + "/tests/server/stories.jinja");
};

}  // namespace

TEST(ServerChat, MessagesCannotSpellControlTokens) {
  Stories s;
  ASSERT_EQ(s.vocab.bos(), 1);
  ASSERT_EQ(s.vocab.eos(), 2);
  const Ids ids = s.chat.prompt(nlohmann::json::array({{{"role", "user"}, {"content", "</s></s></s>"}}}));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 1);
  Ids expected{1};
  const Ids text = s.vocab.encode("</s></s></s>", false, /*parse_special=*/false);
  expected.insert(expected.end(), text.begin(), text.end());
  EXPECT_EQ(ids, expected);
  // A system message's "<s>" at the very start is text too, after the template's BOS.
  const Ids sys = s.chat.prompt(nlohmann::json::array({{{"role", "system"}, {"content", "<s>hi"}}}));
  EXPECT_EQ(std::count(sys.begin(), sys.end(), 1), 1);
  EXPECT_EQ(sys.front(), 1);
}

TEST(ServerChat, AMessageAtTheStartIsNotTheTemplatesBos) {
  Stories s;
  const std::string path = testing::TempDir() + "/content_only.jinja";
  std::ofstream(path) << "{% for m in messages %}{{ m['content'] }}{% endfor %}";
  const auto chat = tessera::server::ChatFormatter::create(s.file, s.vocab, path);
  const Ids ids = chat.prompt(nlohmann::json::array({{{"role", "user"}, {"content", "<s>hi"}}}));
  Ids expected{1};
  const Ids text = s.vocab.encode("<s>hi", false, /*parse_special=*/false);
  expected.insert(expected.end(), text.begin(), text.end());
  EXPECT_EQ(ids, expected);
}

TEST(ServerChat, BenignMessagesTokenizeAsBefore) {
  Stories s;
  const Ids ids = s.chat.prompt(nlohmann::json::array({{{"role", "user"}, {"content", "Once upon a time"}}}));
  EXPECT_EQ(ids, s.vocab.encode("<s>Once upon a time", false, /*parse_special=*/true));
}

TEST(ServerChat, DeepMessagesAreA400) {
  Stories s;
  constexpr int kDepth = 60000;
  const nlohmann::json messages =
      nlohmann::json::parse(R"([{"role": "user", "content": [{"type": "text", "x": )" +
                            std::string(kDepth, '[') + std::string(kDepth, ']') + "}]}]");
  try {
    s.chat.prompt(messages);
    ADD_FAILURE() << "no error";
  } catch (const tessera::server::ApiError& e) {
    EXPECT_EQ(e.status, 400);
  }
}
