// Saved sessions (tessera/llm/session_file.h): a sequence saved and loaded gives the next token the
// logits of the session that read the prompt itself, bit for bit, on every architecture, into any
// sequence and with layers on a device; every bad file is an Error that leaves the cache as it was.
#include "tessera/llm/session_file.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "support/opencl.h"
#include "tessera/device.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kShared = std::string(TESSERA_SHARED_DIR) + "/models";
const std::string kStories = kShared + "/stories260K.gguf";
const std::string kOracleDir = kShared + "/oracle/";

#define SKIP_WITHOUT_SHARED_MODELS()                                               \
  do {                                                                             \
    if (!std::filesystem::is_directory(kShared)) GTEST_SKIP() << "no " << kShared; \
  } while (0)

std::vector<Token> read_tokens(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f) << path;
  return {std::istream_iterator<Token>(f), std::istream_iterator<Token>()};
}

std::vector<Token> stories_prompt(const Model& model) {
  return Vocab::from_gguf(*model.file())
      .encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
              true);
}

SessionOptions options(int64_t n_ctx, DType kv_type = DType::F16) {
  SessionOptions so;
  so.n_ctx = n_ctx;
  so.n_threads = 2;
  so.kv_type = kv_type;
  return so;
}

// A name of this process's own: ctest runs the tests in parallel processes (two parameterized
// round trips once wrote one file at once).
std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/session_file_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

void write_bytes(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// One token of sequence `seq` at `pos`: its logits.
std::vector<float> decode_one(Session& s, Token t, Pos pos, SeqId seq) {
  Batch b;
  b.add(t, pos, seq, true);
  return s.decode(b);
}

void decode_seq(Session& s, std::span<const Token> tokens, SeqId seq) {
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i)
    b.add(tokens[i], static_cast<Pos>(i), seq, i + 1 == tokens.size());
  s.decode(b);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Everything a load could change: every cell, and every layer's K and V bytes.
struct CacheSnapshot {
  std::vector<std::pair<Pos, std::vector<SeqId>>> cells;
  std::vector<std::vector<std::byte>> kv;

  explicit CacheSnapshot(const Session& s) {
    const KvCache& c = s.cache();
    for (int64_t i = 0; i < c.size(); ++i) cells.emplace_back(c.cell(i).pos, c.cell(i).seqs);
    for (int64_t il = 0; il < s.model().hparams().n_layer; ++il)
      for (const Tensor* t : {c.k(il), c.v(il)}) {
        kv.emplace_back(t->nbytes());
        tensor_get(*t, kv.back().data(), 0, t->nbytes());
      }
  }
  bool operator==(const CacheSnapshot&) const = default;
};

// Leaves only cells 0..9, 20..29, 40..49 and 60..63 of a 64-cell session free (sequences 5..10 in
// blocks of 10, every other one removed again), so that a load of 11 to 34 tokens is scattered.
void scatter_free_cells(Session& s, std::span<const Token> filler) {
  ASSERT_EQ(s.n_ctx(), 64);
  for (SeqId q = 5; q <= 10; ++q) decode_seq(s, filler.first(10), q);
  for (const SeqId q : {5, 7, 9}) s.cache().seq_remove(q, -1, -1);
}

// Whether sequence seq's cells are spread over more cells than it holds.
bool scattered(const KvCache& c, SeqId seq) {
  int64_t lo = -1, hi = -1, n = 0;
  for (int64_t i = 0; i < c.size(); ++i)
    if (c.cell(i).has(seq)) {
      if (lo < 0) lo = i;
      hi = i;
      ++n;
    }
  return hi - lo + 1 > n;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-3) << i;
  EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
            std::max_element(want.begin(), want.end()) - want.begin());
}

// The Error an expression throws (code and message); fails the test when it throws none.
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error";
  return Error(ErrorCode::InvalidArgument, "");
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Reads `prompt` into a session, saves it to a file, loads the file into a fresh session of the
// same model; then the next token's logits agree bit for bit, and the loaded state saves to the
// same bytes.
void check_round_trip(const Model& model, const std::vector<Token>& prompt, Token next, DType kv_type) {
  const std::string path = temp_path("round_trip");
  const auto n_ctx = static_cast<int64_t>(prompt.size()) + 64;
  Session a(model, options(n_ctx, kv_type));
  a.decode(prompt);
  save_sequence_state(a, 0, prompt, path);
  const std::vector<float> want = a.decode(std::span<const Token>(&next, 1));

  Session b(model, options(n_ctx, kv_type));
  EXPECT_EQ(load_sequence_state(b, 0, path), prompt);
  EXPECT_EQ(b.n_past(), static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(save_sequence_state_bytes(b, 0, prompt), read_bytes(path));
  const std::vector<float> got = b.decode(std::span<const Token>(&next, 1));
  EXPECT_TRUE(same_bits(got, want));
}

}  // namespace

TEST(SessionFile, RoundTripGivesTheLogitsOfTheSessionThatReadThePrompt) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);
  ASSERT_GT(prompt.size(), 10u);
  check_round_trip(*model, prompt, 13, DType::F16);
  check_round_trip(*model, prompt, 13, DType::F32);
}

class SessionFileOracle : public testing::TestWithParam<const char*> {};

TEST_P(SessionFileOracle, RoundTripIsBitExact) {
  SKIP_WITHOUT_SHARED_MODELS();
  const std::string base = kOracleDir + GetParam();
  auto model = Model::load(base + ".gguf");
  std::vector<Token> prompt = read_tokens(base + ".tokens");
  ASSERT_GE(prompt.size(), 2u);
  const Token next = prompt.back();
  prompt.pop_back();
  check_round_trip(*model, prompt, next, DType::F16);
}

// One per architecture, and a quantized mix.
INSTANTIATE_TEST_SUITE_P(Architectures, SessionFileOracle,
                         testing::Values("tiny-llama-f32", "tiny-llama3-f32", "tiny-qwen2-f32",
                                         "tiny-qwen3-f32", "tiny-phi3-f16", "tiny-gemma2-f32",
                                         "tiny-gemma3-f32", "tiny-llama-q4_k_m"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// The architectures whose oracles are tests/fixtures/archs (no ../shared needed).
class SessionFileFixture : public testing::TestWithParam<const char*> {};

TEST_P(SessionFileFixture, RoundTripIsBitExact) {
  const std::string base = std::string(TESSERA_FIXTURES_DIR) + "/archs/" + GetParam();
  auto model = Model::load(base + ".gguf");
  std::vector<Token> prompt = read_tokens(base + ".tokens");
  ASSERT_GE(prompt.size(), 2u);
  const Token next = prompt.back();
  prompt.pop_back();
  check_round_trip(*model, prompt, next, DType::F16);
}

INSTANTIATE_TEST_SUITE_P(Architectures, SessionFileFixture,
                         testing::Values("tiny-granite-f32", "tiny-granitemoe-f32", "tiny-olmoe-f32",
                                         "tiny-smollm3-f32"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(SessionFile, LoadsIntoSequenceOneOfAMultiSequenceCache) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const Vocab vocab = Vocab::from_gguf(*model->file());
  const std::vector<Token> other = vocab.encode("The dog ran to the big tree.", true);
  const std::vector<Token> prompt = stories_prompt(*model);
  const auto n = static_cast<Pos>(prompt.size());
  const Token next = 13;

  // The reference reads `other` into sequence 0 and `prompt` into sequence 1, then saves sequence 1.
  Session ref(*model, options(256));
  decode_seq(ref, other, 0);
  decode_seq(ref, prompt, 1);
  const std::vector<std::byte> state = save_sequence_state_bytes(ref, 1, prompt);
  const std::vector<float> want1 = decode_one(ref, next, n, 1);
  const std::vector<float> want0 = decode_one(ref, next, static_cast<Pos>(other.size()), 0);

  // Sequence 1 holds something else first: loading clears it.
  Session s(*model, options(256));
  decode_seq(s, other, 0);
  decode_seq(s, vocab.encode("Tom had a red ball.", true), 1);
  EXPECT_EQ(load_sequence_state_bytes(s, 1, state), prompt);
  EXPECT_EQ(s.cache().seq_pos_max(1), n - 1);
  EXPECT_EQ(s.cache().used(), static_cast<int64_t>(other.size() + prompt.size()));
  EXPECT_TRUE(same_bits(decode_one(s, next, n, 1), want1));
  EXPECT_TRUE(same_bits(decode_one(s, next, static_cast<Pos>(other.size()), 0), want0));

  // A state saved from sequence 0 of a session alone loads into sequence 1 as well (the cells
  // differ, so the sums run in another order: equal within rounding, the same greedy token).
  Session alone(*model, options(256));
  alone.decode(prompt);
  const std::vector<std::byte> alone_state = save_sequence_state_bytes(alone, 0, prompt);
  Session t(*model, options(256));
  decode_seq(t, other, 0);
  load_sequence_state_bytes(t, 1, alone_state);
  expect_near(decode_one(t, next, n, 1), want1);
}

// Loaded into scattered free cells, the state saves back to the same bytes and decodes on.
TEST(SessionFile, LoadsIntoScatteredCells) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);
  ASSERT_GT(prompt.size(), 10u);
  ASSERT_LT(prompt.size(), 35u);
  const Token next = 13;
  Session a(*model, options(64));
  a.decode(prompt);
  const std::vector<std::byte> state = save_sequence_state_bytes(a, 0, prompt);
  const std::vector<float> want = a.decode(std::span<const Token>(&next, 1));

  Session s(*model, options(64));
  scatter_free_cells(s, prompt);
  EXPECT_EQ(load_sequence_state_bytes(s, 0, state), prompt);
  EXPECT_TRUE(scattered(s.cache(), 0));
  EXPECT_EQ(save_sequence_state_bytes(s, 0, prompt), state);
  expect_near(decode_one(s, next, static_cast<Pos>(prompt.size()), 0), want);
}

TEST(SessionFile, ACorruptedFileIsAnErrorAndTheCacheIsUnchanged) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);
  Session a(*model, options(256));
  a.decode(prompt);
  const std::vector<std::byte> good = save_sequence_state_bytes(a, 0, prompt);

  Session s(*model, options(256));
  decode_seq(s, Vocab::from_gguf(*model->file()).encode("Tom had a red ball.", true), 1);
  const CacheSnapshot before(s);
  const std::string path = temp_path("corrupted");
  // A byte in the identity, in the tokens, in the K/V and in the checksum itself.
  for (const size_t at : {size_t{30}, good.size() / 3, good.size() - 100, good.size() - 1}) {
    std::vector<std::byte> bad = good;
    bad[at] ^= std::byte{0x10};
    write_bytes(path, bad);
    for (const SeqId seq : {0, 1}) {
      const Error e = error_of([&] { load_sequence_state(s, seq, path); });
      EXPECT_EQ(e.code(), ErrorCode::CorruptFile) << at;
      EXPECT_TRUE(contains(e.what(), path + ": corrupted")) << e.what();
      EXPECT_TRUE(CacheSnapshot(s) == before) << at;
    }
  }
  // Not a session file; another format version.
  std::vector<std::byte> bad = good;
  bad[0] = std::byte{'X'};
  Error e = error_of([&] { load_sequence_state_bytes(s, 1, bad, "x.bin"); });
  EXPECT_EQ(e.code(), ErrorCode::CorruptFile);
  EXPECT_TRUE(contains(e.what(), "x.bin: not a Tessera session file")) << e.what();
  bad = good;
  bad[8] = std::byte{kSessionFileVersion + 1};
  e = error_of([&] { load_sequence_state_bytes(s, 1, bad, "x.bin"); });
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(e.what(), fmt::format("version {}", kSessionFileVersion + 1))) << e.what();
  EXPECT_TRUE(CacheSnapshot(s) == before);
  // The good file still loads.
  EXPECT_EQ(load_sequence_state_bytes(s, 0, good), prompt);
}

TEST(SessionFile, ATruncatedFileIsAnError) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);
  Session a(*model, options(256));
  a.decode(prompt);
  const std::string path = temp_path("truncated");
  save_sequence_state(a, 0, prompt, path);
  const std::vector<std::byte> good = read_bytes(path);
  Session s(*model, options(256));
  for (const size_t size : {size_t{0}, size_t{5}, size_t{19}, good.size() / 2, good.size() - 1}) {
    write_bytes(path, std::span(good).first(size));
    const Error e = error_of([&] { load_sequence_state(s, 0, path); });
    EXPECT_EQ(e.code(), ErrorCode::CorruptFile) << size;
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
    EXPECT_TRUE(contains(e.what(), size == 0 ? "empty" : "truncated")) << e.what();
    EXPECT_EQ(s.cache().used(), 0);
  }
  const Error e = error_of([&] { load_sequence_state(s, 0, temp_path("no_such_file")); });
  EXPECT_EQ(e.code(), ErrorCode::Io);
}

TEST(SessionFile, AFileOfAnotherModelIsAnErrorNamingTheDifference) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto llama = Model::load(kOracleDir + "tiny-llama-f32.gguf");
  std::vector<Token> prompt = read_tokens(kOracleDir + "tiny-llama-f32.tokens");
  Session a(*llama, options(64));
  a.decode(prompt);
  const std::vector<std::byte> state = save_sequence_state_bytes(a, 0, prompt);

  auto expect_refused = [&](const Model& other, const std::string& difference) {
    Session s(other, options(64));
    const Error e = error_of([&] { load_sequence_state_bytes(s, 0, state, "llama.session"); });
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.what(), "llama.session: saved with another model: " + difference)) << e.what();
    EXPECT_EQ(s.cache().used(), 0);
  };
  expect_refused(*Model::load(kOracleDir + "tiny-qwen2-f32.gguf"),
                 "architecture llama (in the file) vs qwen2");
  // The same shapes in another type.
  expect_refused(*Model::load(kOracleDir + "tiny-llama-q4_k_m.gguf"), "tensor ");
  // The same weights, one metadata value changed: the GGUF header's digest differs.
  const gguf::File src = gguf::File::open(kOracleDir + "tiny-llama-f32.gguf");
  gguf::Writer w;
  for (const auto& [key, value] : src.kvs())
    if (key != "general.alignment") w.set(key, value);
  w.set("general.name", std::string("renamed"));
  for (const gguf::TensorInfo& t : src.tensors()) {
    const std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    w.add_tensor_raw(t.name, t.type_id, ne, src.tensor_data(t), t.nbytes);
  }
  const std::string copy = temp_path("renamed.gguf");
  w.write(copy);
  expect_refused(*Model::load(copy), "GGUF ");
  // The file itself loads (the same model, loaded again).
  auto again = Model::load(kOracleDir + "tiny-llama-f32.gguf");
  Session same(*again, options(64));
  EXPECT_EQ(load_sequence_state_bytes(same, 0, state), prompt);
}

TEST(SessionFile, AGraniteWithOtherScalesIsAnotherModel) {
  // The identity names Granite's scales (as every hyperparameter): a state of one granite does not
  // load into a granite whose residual scale differs, and the error says which.
  const std::string base = std::string(TESSERA_FIXTURES_DIR) + "/archs/tiny-granite-f32";
  auto granite = Model::load(base + ".gguf");
  const std::vector<Token> prompt = read_tokens(base + ".tokens");
  Session a(*granite, options(64));
  a.decode(prompt);
  const std::vector<std::byte> state = save_sequence_state_bytes(a, 0, prompt);
  const gguf::File src = gguf::File::open(base + ".gguf");
  gguf::Writer w;
  for (const auto& [key, value] : src.kvs())
    if (key != "general.alignment") w.set(key, value);
  w.set("granite.residual_scale", 0.5f);
  for (const gguf::TensorInfo& t : src.tensors()) {
    const std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    w.add_tensor_raw(t.name, t.type_id, ne, src.tensor_data(t), t.nbytes);
  }
  const std::string copy = temp_path("granite_scaled.gguf");
  w.write(copy);
  auto other = Model::load(copy);
  Session s(*other, options(64));
  const Error e = error_of([&] { load_sequence_state_bytes(s, 0, state, "granite.session"); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), "hyperparameter residual_scale 0.22 (in the file) vs 0.5 (this model)"))
      << e.what();
  EXPECT_EQ(s.cache().used(), 0);
}

TEST(SessionFile, AnotherKvTypeIsAnError) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);
  Session f16(*model, options(256, DType::F16));
  f16.decode(prompt);
  Session f32(*model, options(256, DType::F32));
  const Error e =
      error_of([&] { load_sequence_state_bytes(f32, 0, save_sequence_state_bytes(f16, 0, prompt)); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), "KV type f16 (in the file) vs f32")) << e.what();
  EXPECT_EQ(f32.cache().used(), 0);
}

TEST(SessionFile, TooSmallAContextIsAnError) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);  // 32 tokens
  ASSERT_GT(prompt.size(), 20u);
  ASSERT_LT(prompt.size(), 40u);
  Session a(*model, options(64));
  a.decode(prompt);
  const std::vector<std::byte> state = save_sequence_state_bytes(a, 0, prompt);

  Session tiny(*model, options(16));
  Error e = error_of([&] { load_sequence_state_bytes(tiny, 0, state); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), "the context of 16 cells is too small")) << e.what();

  // 40 cells with 20 in use by sequence 0: sequence 1 has no room, sequence 0's own cells come free.
  Session s(*model, options(40));
  decode_seq(s, std::vector<Token>(prompt.begin(), prompt.begin() + 20), 0);
  const CacheSnapshot before(s);
  e = error_of([&] { load_sequence_state_bytes(s, 1, state); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), "do not fit in the KV cache: 20 of its 40 cells are free")) << e.what();
  EXPECT_TRUE(CacheSnapshot(s) == before);
  EXPECT_EQ(load_sequence_state_bytes(s, 0, state), prompt);
  EXPECT_EQ(s.n_past(), static_cast<int64_t>(prompt.size()));
}

TEST(SessionFile, OnlyASequenceFromPositionZeroWithoutGapsOrShiftsIsSaved) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);
  const auto n = static_cast<Pos>(prompt.size());
  Session s(*model, options(64));
  s.decode(prompt);
  // Another token count than the cache holds.
  Error e = error_of([&] { save_sequence_state_bytes(s, 0, std::span(prompt).first(3)); });
  EXPECT_TRUE(contains(e.what(), "3 tokens given, but the cache holds")) << e.what();
  // The end removed: still positions 0..n-3, which saves.
  s.cache().seq_remove(0, n - 2, -1);
  EXPECT_NO_THROW(save_sequence_state_bytes(s, 0, std::span(prompt).first(prompt.size() - 2)));
  // A gap at the start.
  s.cache().seq_remove(0, 0, 2);
  e = error_of([&] { save_sequence_state_bytes(s, 0, std::span(prompt).first(prompt.size() - 4)); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), "does not hold positions 0..")) << e.what();
  // Shifted back to 0, but K is roped at the old positions until the next decode.
  s.cache().seq_shift(0, 2, -1, -2);
  e = error_of([&] { save_sequence_state_bytes(s, 0, std::span(prompt).first(prompt.size() - 4)); });
  EXPECT_TRUE(contains(e.what(), "was shifted")) << e.what();
  const Token next = 13;
  s.decode(std::span<const Token>(&next, 1));  // re-ropes K
  std::vector<Token> now(prompt.begin() + 2, prompt.end() - 2);
  now.push_back(next);
  EXPECT_NO_THROW(save_sequence_state_bytes(s, 0, now));
  // An empty sequence saves and loads as empty.
  Session empty(*model, options(64));
  EXPECT_TRUE(load_sequence_state_bytes(empty, 0, save_sequence_state_bytes(empty, 3, {})).empty());
}

TEST(SessionFile, SavingReplacesTheFileWhole) {
  SKIP_WITHOUT_SHARED_MODELS();
  auto model = Model::load(kStories);
  const std::vector<Token> prompt = stories_prompt(*model);
  Session s(*model, options(64));
  s.decode(prompt);
  const std::string dir = temp_path("dir");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/prompt.session";
  write_bytes(path, std::vector<std::byte>(10, std::byte{1}));
  save_sequence_state(s, 0, prompt, path);
  EXPECT_EQ(read_bytes(path), save_sequence_state_bytes(s, 0, prompt));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()),
            1);
  // An error while writing (here: before the first byte) leaves the old file and no temporary one.
  const std::vector<std::byte> old = read_bytes(path);
  EXPECT_THROW(save_sequence_state(s, 0, std::span(prompt).first(2), path), Error);
  EXPECT_EQ(read_bytes(path), old);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()),
            1);
  const Error e = error_of([&] { save_sequence_state(s, 0, prompt, dir + "/no/such/dir/x.session"); });
  EXPECT_EQ(e.code(), ErrorCode::Io);
}

// The K/V of offloaded layers live in device memory and go through the buffers: a state saved with
// layers on a device loads into a session of the same split (bit for bit) and into one on the CPU.
void check_offloaded_round_trip(const std::string& device, int n_gpu_layers) {
  LoadOptions lo;
  lo.device = device;
  lo.n_gpu_layers = n_gpu_layers;
  auto model = Model::load(kStories, lo);
  ASSERT_NE(model->device(), nullptr);
  const std::vector<Token> prompt = stories_prompt(*model);
  const Token next = 13;
  Session a(*model, options(64));
  a.decode(prompt);
  const std::vector<std::byte> state = save_sequence_state_bytes(a, 0, prompt);
  const std::vector<float> want = a.decode(std::span<const Token>(&next, 1));

  Session b(*model, options(64));
  EXPECT_EQ(load_sequence_state_bytes(b, 0, state), prompt);
  EXPECT_EQ(save_sequence_state_bytes(b, 0, prompt), state);
  EXPECT_TRUE(same_bits(b.decode(std::span<const Token>(&next, 1)), want)) << device << " " << n_gpu_layers;
  // Scattered cells on the device too.
  Session scattered_cells(*model, options(64));
  scatter_free_cells(scattered_cells, prompt);
  EXPECT_EQ(load_sequence_state_bytes(scattered_cells, 0, state), prompt);
  EXPECT_TRUE(scattered(scattered_cells.cache(), 0));
  EXPECT_EQ(save_sequence_state_bytes(scattered_cells, 0, prompt), state);

  auto cpu_model = Model::load(kStories);
  Session c(*cpu_model, options(64));
  EXPECT_EQ(load_sequence_state_bytes(c, 0, state), prompt);
  expect_near(c.decode(std::span<const Token>(&next, 1)), want);
}

TEST(SessionFile, RoundTripWithLayersOnHost0) {
  SKIP_WITHOUT_SHARED_MODELS();
  ASSERT_NE(Registry::instance().find("Host0"), nullptr)
      << "Host0 missing (ctest sets TESSERA_HOST_DEVICES=2)";
  check_offloaded_round_trip("Host0", 2);
  check_offloaded_round_trip("Host0", 99);
}

TEST(SessionFile, RoundTripWithLayersOnOpenCl0) {
  SKIP_WITHOUT_SHARED_MODELS();
  TESSERA_REQUIRE_OPENCL_DEVICE("OpenCL0");
  check_offloaded_round_trip("OpenCL0", 2);
}
