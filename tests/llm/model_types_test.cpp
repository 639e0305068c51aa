// A model file holding a tensor type Tessera cannot compute with is a clear error, never garbage.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/cli.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/model.h"

using namespace tessera;

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
constexpr uint32_t kQ8_1 = 9;  // a ggml type (32 elements in 36 bytes) Tessera has no DType for

// stories260K with one 2-D weight stored as `type_id` (same shape, zero bytes of that type's size).
std::string write_retyped_copy(const std::string& tensor, uint32_t type_id, const std::string& path) {
  const gguf::File src = gguf::File::open(kModel);
  gguf::Writer w;
  for (const auto& [key, value] : src.kvs())
    if (key != "general.alignment") w.set(key, value);
  for (const gguf::TensorInfo& t : src.tensors()) {
    const std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (t.name == tensor) {
      const gguf::GgmlType* g = gguf::ggml_type(type_id);
      const size_t bytes = static_cast<size_t>(t.ne[0] / g->block_size) * g->block_bytes *
                           static_cast<size_t>(t.ne[1] * t.ne[2] * t.ne[3]);
      const std::vector<std::byte> zeros(bytes);
      w.add_tensor_raw(t.name, type_id, ne, zeros.data(), zeros.size());
    } else {
      w.add_tensor_raw(t.name, t.type_id, ne, src.tensor_data(t), t.nbytes);
    }
  }
  w.write(path);
  return path;
}

}  // namespace

TEST(ModelTypes, UnknownTensorTypeIsAnErrorNamingTensorAndType) {
  const std::string path =
      write_retyped_copy("blk.1.attn_k.weight", kQ8_1, ::testing::TempDir() + "/q8_1_weight.gguf");
  // The file still opens (it can be dumped) and reports the type as unknown, with no stand-in.
  const gguf::File f = gguf::File::open(path);
  const gguf::TensorInfo* info = f.find_tensor("blk.1.attn_k.weight");
  ASSERT_NE(info, nullptr);
  EXPECT_FALSE(info->type.has_value());
  EXPECT_EQ(info->type_name(), "q8_1");
  try {
    (void)llm::Model::load(path);
    FAIL() << "loaded a model with a q8_1 weight";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("blk.1.attn_k.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("q8_1"), std::string::npos) << what;
  }
  std::remove(path.c_str());
}

TEST(ModelTypes, CliRefusesUnknownTensorTypeWithExitOne) {
  const std::string path =
      write_retyped_copy("blk.0.ffn_up.weight", kQ8_1, ::testing::TempDir() + "/q8_1_cli.gguf");
  const std::string out = ::testing::TempDir() + "/q8_1_cli.bin";
  const auto logits = testing_support::run_cli("logits -m " + path + " --tokens \"1 2 3\" -o " + out);
  EXPECT_EQ(logits.code, 1) << logits.out;
  EXPECT_NE(logits.out.find("blk.0.ffn_up.weight"), std::string::npos) << logits.out;
  EXPECT_NE(logits.out.find("q8_1"), std::string::npos) << logits.out;
  const auto run = testing_support::run_cli("run -m " + path + " -p Hello -n 2");
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("q8_1"), std::string::npos) << run.out;
  std::remove(path.c_str());
  std::remove(out.c_str());
}
