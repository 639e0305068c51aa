// `tessera embed`: the vector llm::embed gives (the encoder oracle's, llama.cpp's within its bound),
// pooling none, and `tessera run` on an embedding model is an error naming why.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli.h"

namespace {

const std::string kFixtures = std::string(TESSERA_FIXTURES_DIR) + "/embeddings/";

std::vector<std::vector<float>> rows(const std::string& out) {
  std::vector<std::vector<float>> r;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<float> v;
    for (float x; ls >> x;) v.push_back(x);
    if (!v.empty()) r.push_back(v);
  }
  return r;
}

}  // namespace

TEST(EmbedCli, PrintsTheFilesPoolingOfLlamaCppsVector) {
  // nomic-bert's first oracle line: the mean, as its file says.
  std::ifstream f(kFixtures + "expected.jsonl");
  nlohmann::json want;
  for (std::string line; std::getline(f, line);) {
    want = nlohmann::json::parse(line);
    if (want["model"] == "nomic-bert") break;
  }
  const auto r = tessera::testing_support::run_cli("embed -t 1 -m " + kFixtures + "nomic-bert.gguf -p '" +
                                                   want["text"].get<std::string>() + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto got = rows(r.out);
  ASSERT_EQ(got.size(), 1u) << r.out;
  const std::vector<float> w = want["embedding"].get<std::vector<float>>();
  ASSERT_EQ(got[0].size(), w.size());
  for (size_t j = 0; j < w.size(); ++j)
    EXPECT_NEAR(got[0][j], w[j], 2e-6 + 1e-5) << j;  // printed to 6 places

  const auto unit = tessera::testing_support::run_cli("embed -t 1 --normalize -m " + kFixtures +
                                                      "nomic-bert.gguf -p 'the cat'");
  ASSERT_EQ(unit.code, 0) << unit.out;
  const auto unit_rows = rows(unit.out);
  ASSERT_EQ(unit_rows.size(), 1u) << unit.out;
  double norm = 0;
  for (float x : unit_rows[0]) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-4);

  const auto none = tessera::testing_support::run_cli("embed -t 1 --pooling none -m " + kFixtures +
                                                      "bert.gguf -p 'the cat'");
  ASSERT_EQ(none.code, 0) << none.out;
  EXPECT_EQ(rows(none.out).size(), 4u);  // [CLS] the cat [SEP]
}

TEST(EmbedCli, RunOnAnEmbeddingModelSaysWhy) {
  const auto r = tessera::testing_support::run_cli("run -m " + kFixtures + "bert.gguf -p hello -n 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("embedding model"), std::string::npos) << r.out;
}
