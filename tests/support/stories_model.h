#pragma once
// stories260K (../shared/models), a real trained tiny Llama, loaded once per test suite for the
// llm tests that decode and generate with it, and the plain greedy loop they compare with.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "tessera/llm/model.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/session.h"
#include "tessera/llm/token_streamer.h"
#include "tessera/llm/vocab.h"

namespace tessera::testing_support {

inline const std::string kStoriesModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";

// A model's greedy continuation of `prompt` (with BOS), n token ids whatever they are (ends of
// generation included), from a Session of its own.
inline std::vector<llm::Token> greedy_ids(const llm::Model& model, const llm::Vocab& vocab,
                                          const std::string& prompt, int n) {
  llm::Session session(model);
  llm::SamplerOptions options;
  options.temperature = 0.0f;
  llm::Sampler sampler(options);
  std::vector<float> logits = session.decode(vocab.encode(prompt, true));
  std::vector<llm::Token> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back(sampler.sample(logits));
    logits = session.decode(std::span<const llm::Token>(&ids.back(), 1));
  }
  return ids;
}

class StoriesModelTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = llm::Model::load(kStoriesModel).release();
    vocab_ = new llm::Vocab(llm::Vocab::from_gguf(*model_->file()));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete model_;
    vocab_ = nullptr;
    model_ = nullptr;
  }
  // The independent expectation of generation: greedy text after `prompt` (with BOS), at most n
  // tokens, from a Session of its own, one token at a time, up to an end-of-generation token.
  static std::string greedy_reference(const std::string& prompt, int n) {
    llm::Session session(*model_);
    llm::SamplerOptions options;
    options.temperature = 0.0f;
    llm::Sampler sampler(options);
    std::vector<float> logits = session.decode(vocab_->encode(prompt, true));
    llm::TokenStreamer streamer(*vocab_);
    std::string text;
    for (int i = 0; i < n; ++i) {
      const llm::Token next = sampler.sample(logits);
      if (vocab_->is_end_of_generation(next)) break;
      text += streamer.push(next);
      logits = session.decode(std::span<const llm::Token>(&next, 1));
    }
    return text + streamer.finish();
  }
  static inline llm::Model* model_ = nullptr;
  static inline llm::Vocab* vocab_ = nullptr;
};

}  // namespace tessera::testing_support
