#pragma once
// llama.cpp's tokenizer test vectors in ../shared/vocab: NAME.gguf.inp holds strings each followed
// by "\n__ggml_vocab_test__\n"; NAME.gguf.out holds the expected ids of each, one line per string.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::testing_support {

inline const std::string kVocabDir = std::string(TESSERA_SHARED_DIR) + "/vocab/";

inline std::string vocab_path(const std::string& name) { return kVocabDir + "ggml-vocab-" + name + ".gguf"; }

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> read_vocab_inputs(const std::string& path) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  const std::string all = read_all(path);
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t at; (at = all.find(sep, pos)) != std::string::npos; pos = at + sep.size()) {
    out.push_back(all.substr(pos, at - pos));
  }
  EXPECT_EQ(pos, all.size()) << "text after the last separator";
  return out;
}

inline std::vector<std::vector<llm::Token>> read_vocab_outputs(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<std::vector<llm::Token>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ss(line);
    std::vector<llm::Token> ids;
    for (llm::Token t; ss >> t;) ids.push_back(t);
    out.push_back(ids);
  }
  return out;
}

}  // namespace tessera::testing_support
