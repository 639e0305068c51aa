// POST /v1/embeddings with stories260K: a string's embedding is the normalized mean of the hidden
// states a Session decodes by hand (and llm::embed's), inputs keep their order, base64 is the same
// floats, token ids equal their text, the pooling extension, the limits and errors, --embeddings.
#include "server/embeddings.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tessera/llm/embeddings.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"
#include "tessera/server.h"

using namespace tessera;
using nlohmann::json;

#include "test_server.h"

using namespace tessera::test_server;

namespace {

std::vector<float> floats(const json& a) { return a.get<std::vector<float>>(); }

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

std::vector<uint8_t> base64_decode(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const int v = value(c);
    EXPECT_GE(v, 0) << "not base64: " << c;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// The independent expectation: every token's hidden state from one decode, averaged and
// normalized here.
std::vector<float> mean_by_hand(const std::string& text) {
  auto model = llm::Model::load(kModel);
  const llm::Vocab vocab = llm::Vocab::from_gguf(*model->file());
  llm::SessionOptions so;
  so.embeddings = true;
  llm::Session session(*model, so);
  const std::vector<llm::Token> tokens = vocab.encode(text, true);
  const std::vector<float>& rows = session.decode(tokens, /*all_logits=*/true);
  const size_t n_embd = static_cast<size_t>(model->hparams().n_embd);
  EXPECT_EQ(rows.size(), tokens.size() * n_embd);
  std::vector<double> mean(n_embd, 0.0);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (size_t j = 0; j < n_embd; ++j) mean[j] += rows[t * n_embd + j] / static_cast<double>(tokens.size());
  double norm = 0.0;
  for (double m : mean) norm += m * m;
  std::vector<float> out(n_embd);
  for (size_t j = 0; j < n_embd; ++j) out[j] = static_cast<float>(mean[j] / std::sqrt(norm));
  return out;
}

}  // namespace

TEST(ServerEmbeddings, AStringIsTheNormalizedMeanOfItsHiddenStates) {
  TestServer s;
  auto r = s.post("/v1/embeddings", {{"input", "Once upon a time" + kLily}, {"model", "x"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "stories260K.gguf");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  const std::vector<float> got = floats(j["data"][0]["embedding"]);
  const std::vector<float> want = mean_by_hand("Once upon a time" + kLily);
  EXPECT_LE(max_abs_diff(got, want), 1e-5f);
  double norm = 0.0;
  for (float x : got) norm += static_cast<double>(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);

  // llm::embed, the function the C API uses, gives the same vector.
  auto model = llm::Model::load(kModel);
  const llm::Vocab vocab = llm::Vocab::from_gguf(*model->file());
  llm::SessionOptions so;
  so.embeddings = true;
  llm::Session session(*model, so);
  const std::vector<llm::Token> tokens = vocab.encode("Once upon a time" + kLily, true);
  EXPECT_LE(max_abs_diff(got, llm::embed(session, tokens, llm::Pooling::Mean, true)), 1e-6f);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens.size());
  EXPECT_EQ(j["usage"]["total_tokens"], tokens.size());

  // The same tokens given as ids: the same vector.
  auto ids = s.post("/v1/embeddings", {{"input", tokens}});
  ASSERT_EQ(ids->status, 200) << ids->body;
  EXPECT_LE(max_abs_diff(floats(json::parse(ids->body)["data"][0]["embedding"]), got), 1e-6f);
}

TEST(ServerEmbeddings, InputsKeepTheirOrderAndBase64IsTheSameFloats) {
  TestServer s;
  const json inputs = json::array({"Lily went to the park", "The cat sat", "Lily went to the park"});
  auto r = s.post("/v1/embeddings", {{"input", inputs}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  ASSERT_EQ(j["data"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(j["data"][i]["index"], i);
  const auto a = floats(j["data"][0]["embedding"]), b = floats(j["data"][1]["embedding"]),
             c = floats(j["data"][2]["embedding"]);
  EXPECT_EQ(a, c);
  EXPECT_GT(max_abs_diff(a, b), 1e-3f);
  auto single = s.post("/v1/embeddings", {{"input", "The cat sat"}});
  EXPECT_EQ(floats(json::parse(single->body)["data"][0]["embedding"]), b);

  auto b64 = s.post("/v1/embeddings", {{"input", inputs}, {"encoding_format", "base64"}});
  ASSERT_EQ(b64->status, 200) << b64->body;
  const json k = json::parse(b64->body);
  for (int i = 0; i < 3; ++i) {
    const std::vector<uint8_t> bytes = base64_decode(k["data"][i]["embedding"].get<std::string>());
    std::vector<float> v(bytes.size() / sizeof(float));
    ASSERT_EQ(bytes.size(), a.size() * sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    EXPECT_EQ(v, floats(j["data"][i]["embedding"]));  // the shortest text of a float reads back exactly
  }
  // Arrays of token ids, several.
  auto many =
      s.post("/v1/embeddings", {{"input", json::array({json::array({1, 2, 3}), json::array({1, 4})})}});
  ASSERT_EQ(many->status, 200) << many->body;
  EXPECT_EQ(json::parse(many->body)["data"].size(), 2u);
  EXPECT_EQ(json::parse(many->body)["usage"]["prompt_tokens"], 5);
}

TEST(ServerEmbeddings, PoolingExtension) {
  TestServer s;
  auto model = llm::Model::load(kModel);
  const llm::Vocab vocab = llm::Vocab::from_gguf(*model->file());
  llm::SessionOptions so;
  so.embeddings = true;
  llm::Session session(*model, so);
  const std::vector<llm::Token> tokens = vocab.encode("The cat sat", true);
  const std::vector<float> rows = session.decode(tokens, true);
  const size_t n_embd = static_cast<size_t>(model->hparams().n_embd);
  session.reset();
  auto row = [&](size_t t) {
    std::vector<float> v(rows.begin() + static_cast<ptrdiff_t>(t * n_embd),
                         rows.begin() + static_cast<ptrdiff_t>((t + 1) * n_embd));
    llm::l2_normalize(v);
    return v;
  };
  auto last = s.post("/v1/embeddings", {{"input", "The cat sat"}, {"pooling", "last"}});
  ASSERT_EQ(last->status, 200) << last->body;
  EXPECT_LE(max_abs_diff(floats(json::parse(last->body)["data"][0]["embedding"]), row(tokens.size() - 1)),
            1e-5f);
  auto cls = s.post("/v1/embeddings", {{"input", "The cat sat"}, {"pooling", "cls"}});
  EXPECT_LE(max_abs_diff(floats(json::parse(cls->body)["data"][0]["embedding"]), row(0)), 1e-5f);
  auto none = s.post("/v1/embeddings", {{"input", "The cat sat"}, {"pooling", "none"}});
  ASSERT_EQ(none->status, 200) << none->body;
  const json per_token = json::parse(none->body)["data"][0]["embedding"];
  ASSERT_EQ(per_token.size(), tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) EXPECT_LE(max_abs_diff(floats(per_token[t]), row(t)), 1e-5f);
}

TEST(ServerEmbeddings, BadRequestsNameWhy) {
  TestServer s;
  expect_error(s.post("/v1/embeddings", {{"model", "x"}}), 400, "missing_input");
  expect_error(s.post("/v1/embeddings", {{"input", ""}}), 400, "empty_input");
  expect_error(s.post("/v1/embeddings", {{"input", json::array()}}), 400, "empty_input");
  expect_error(s.post("/v1/embeddings", {{"input", json::array({"a", 3})}}), 400, "invalid_type");
  expect_error(s.post("/v1/embeddings", {{"input", 7}}), 400, "invalid_type");
  expect_error(s.post("/v1/embeddings", {{"input", json::array({1, 100000})}}), 400, "invalid_value");
  expect_error(s.post("/v1/embeddings", {{"input", "a"}, {"temperature", 1}}), 400, "unknown_parameter");
  expect_error(s.post("/v1/embeddings", {{"input", "a"}, {"encoding_format", "int8"}}), 400, "invalid_value");
  expect_error(s.post("/v1/embeddings", {{"input", "a"}, {"dimensions", 16}}), 400, "unsupported_parameter");
  expect_error(s.post("/v1/embeddings", {{"input", "a"}, {"pooling", "max"}}), 400, "invalid_value");
  auto dims = s.post("/v1/embeddings", {{"input", "a"}, {"dimensions", 64}});  // n_embd: fine
  EXPECT_EQ(dims->status, 200) << dims->body;
  // Too many inputs, an input longer than the context, too many tokens in all.
  expect_error(s.post("/v1/embeddings", {{"input", json(std::vector<std::string>(2049, "a"))}}), 400,
               "too_many_inputs");
  expect_error(s.post("/v1/embeddings", {{"input", json(std::vector<int>(5000, 5))}}), 400,
               "context_length_exceeded");
  expect_error(s.post("/v1/embeddings",
                      {{"input", json(std::vector<std::vector<int>>(2048, std::vector<int>(33, 5)))}}),
               413, "too_many_tokens");
  auto ok = s.post("/v1/embeddings", {{"input", "still serving"}});
  EXPECT_EQ(ok->status, 200);
}

TEST(ServerEmbeddings, EmbeddingsOnlyServerRefusesGeneration) {
  TestServer s([](server::ServerOptions& o) { o.embeddings_only = true; });
  expect_error(s.post("/v1/completions", greedy("Once", 4)), 501, "not_supported");
  auto r = s.post("/v1/embeddings", {{"input", "Once"}});
  EXPECT_EQ(r->status, 200) << r->body;
  auto models = s.client().Get("/v1/models");
  ASSERT_EQ(models->status, 200);
  EXPECT_EQ(json::parse(models->body)["data"][0]["meta"]["n_embd"], 64);
}

TEST(ServerEmbeddings, Base64OfBytes) {
  EXPECT_EQ(server::base64_encode("", 0), "");
  EXPECT_EQ(server::base64_encode("f", 1), "Zg==");
  EXPECT_EQ(server::base64_encode("fo", 2), "Zm8=");
  EXPECT_EQ(server::base64_encode("foo", 3), "Zm9v");
  EXPECT_EQ(server::base64_encode("foobar", 6), "Zm9vYmFy");
}
