// Real chat templates (tests/fixtures/chat_templates/, made by scripts/make_chat_fixtures.mjs with
// Hugging Face's @huggingface/jinja) rendered on varied conversations: every expected text must
// match byte for byte, and every conversation the reference rejects must be an Error here too.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/error.h"
#include "tessera/llm/chat_template.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using tessera::llm::ChatOptions;
using tessera::llm::ChatTemplate;

const fs::path kDir = fs::path(TESSERA_FIXTURES_DIR) / "chat_templates";

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// "2025-03-07T14:05:00Z" -> a time point.
std::chrono::system_clock::time_point parse_utc(const std::string& iso) {
  std::tm tm{};
  std::istringstream in(iso);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::vector<std::string> models() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir)) {
    const std::string name = e.path().filename().string();
    const std::string suffix = ".cases.json";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(name.substr(0, name.size() - suffix.size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(ChatTemplateFixtures, EveryModelIsThere) {
  const auto names = models();
  for (const char* m : {"llama3_1", "llama3_2", "qwen2_5", "qwen3", "gemma3", "deepseek_v3", "mistral_nemo"})
    EXPECT_NE(std::find(names.begin(), names.end(), m), names.end()) << m;
}

TEST(ChatTemplateFixtures, MatchTheReferenceByteForByte) {
  int cases = 0, errors = 0;
  for (const std::string& model : models()) {
    const Json spec = Json::parse(read(kDir / (model + ".cases.json")));
    const ChatTemplate tmpl(read(kDir / spec.at("template").get<std::string>()));
    for (const Json& c : spec.at("cases")) {
      SCOPED_TRACE(model + "/" + c.at("name").get<std::string>());
      ChatOptions o;
      o.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
      o.bos_token = c.at("bos_token").get<std::string>();
      o.eos_token = c.at("eos_token").get<std::string>();
      o.extra = c.at("extra");
      o.now = parse_utc(c.at("now").get<std::string>());
      ++cases;
      if (c.contains("expected_error")) {
        ++errors;
        try {
          tmpl.apply(c.at("messages"), o);
          ADD_FAILURE() << "rendered a conversation the reference rejects";
        } catch (const tessera::Error& e) {
          EXPECT_NE(std::string(e.what()).find(c.at("expected_error").get<std::string>()), std::string::npos)
              << e.what();
        }
        continue;
      }
      std::string got;
      ASSERT_NO_THROW(got = tmpl.apply(c.at("messages"), o));
      EXPECT_EQ(got, c.at("expected").get<std::string>());
    }
  }
  EXPECT_GE(cases, 60);
  EXPECT_GE(errors, 1);
}
