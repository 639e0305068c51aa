// `--pipeline` under mpirun on this machine (2 and 3 ranks): logits and generated text equal the
// single process's; each rank holds only its layers (a model 1.6x a rank's address-space limit
// runs on two ranks and fails cleanly in one process); a rank that fails ends the job with its
// error, never a hang. In a build without MPI, --pipeline is a clear error.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "support/cli.h"
#include "tessera/gguf.h"

using tessera::testing_support::CliResult;
using tessera::testing_support::run_cli;

namespace {

const std::string kStories = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
const std::string kOracle = std::string(TESSERA_SHARED_DIR) + "/models/oracle/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

#if TESSERA_HAVE_MPI

// mpirun as root (CI runs as root), more ranks than cores allowed, and a time limit: a job that
// hangs fails the test instead of stalling the suite. The limit ends with SIGKILL 10 s after its
// SIGTERM: Open MPI 4.1's mpirun was once seen stuck, ignoring SIGTERM, after all three ranks of a
// bad split called MPI_Abort at once on a loaded machine.
// `stderr_too` false: stdout only.
CliResult mpirun(const std::string& ranks_and_args, int seconds = 300, bool stderr_too = true) {
  const std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 " +
                          std::to_string(seconds) + " mpirun --oversubscribe " + ranks_and_args +
                          (stderr_too ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kCli = TESSERA_CLI;

// A temporary file of this test's own (ctest runs the tests of this file at once).
std::string temp_file(const std::string& what) {
  return ::testing::TempDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
         what;
}

// The logits of `tokens` from one process and from a pipeline of n ranks: the same bytes.
void expect_same_logits(const std::string& model, int n_ranks, const std::string& extra = "") {
  const std::string tokens = "\"1 17 300 42 5 99 250 7 64 3 11\"";
  const std::string one = temp_file("one.bin"), many = temp_file("many.bin");
  const CliResult single = run_cli("logits -m " + model + " --tokens " + tokens + " -o " + one);
  ASSERT_EQ(single.code, 0) << single.out;
  const CliResult piped = mpirun("-np " + std::to_string(n_ranks) + " " + kCli + " logits -m " + model +
                                 " --tokens " + tokens + " -o " + many + " --pipeline " + extra);
  ASSERT_EQ(piped.code, 0) << piped.out;
  const std::string a = read_file(one), b = read_file(many);
  EXPECT_GT(a.size(), 0u);
  EXPECT_TRUE(a == b) << model << " on " << n_ranks << " ranks: the logits differ";
  std::remove(one.c_str());
  std::remove(many.c_str());
}

TEST(PipelineCli, TwoRanksGiveTheSingleProcessLogits) {
  expect_same_logits(kStories, 2);
  expect_same_logits(kOracle + "tiny-qwen3moe-q4_k_m.gguf", 2);
  expect_same_logits(kOracle + "tiny-gemma2-f32.gguf", 2);
}

TEST(PipelineCli, ThreeRanksGiveTheSingleProcessLogits) {
  expect_same_logits(kStories, 3);
  expect_same_logits(kStories, 3, "--tensor-split 1,3,1");
  expect_same_logits(kOracle + "tiny-gptoss-mxfp4.gguf", 2);
}

// Generation: the prompt in batches of 4 (-b: the stages work on successive ones at once), then
// token by token; the text is the same.
TEST(PipelineCli, RunGeneratesTheSingleProcessText) {
  const std::string args =
      " run -m " + kStories + " -p \"Once upon a time, in a small town\" -n 48 --temp 0 -c 96 -b 4";
  const CliResult single = run_cli(args.substr(1));
  ASSERT_EQ(single.code, 0) << single.out;
  const std::string text = single.out.substr(0, single.out.find("\nload:"));
  for (int n : {2, 3}) {
    const CliResult piped =
        mpirun("-np " + std::to_string(n) + " " + kCli + args + " --pipeline", 300, false);
    ASSERT_EQ(piped.code, 0) << piped.out;
    EXPECT_EQ(piped.out, text + "\n") << n << " ranks";
  }
}

// perplexity's chunks through the stages: the single process's figures, to the last digit; the
// later ranks print nothing.
TEST(PipelineCli, PerplexityGivesTheSingleProcessFigures) {
  const std::string args = " perplexity -m " + kStories + " -f " + std::string(TESSERA_FIXTURES_DIR) +
                           "/perplexity/story.txt -c 128 -b 64 --chunks 3 -t 1";
  const CliResult single = mpirun("-np 1 " + kCli + args, 300, false);  // one plain process: its stdout
  ASSERT_EQ(single.code, 0) << single.out;
  ASSERT_NE(single.out.find("Final estimate: PPL = "), std::string::npos) << single.out;
  const CliResult piped = mpirun("-np 2 " + kCli + args + " --pipeline", 300, false);
  ASSERT_EQ(piped.code, 0) << piped.out;
  EXPECT_EQ(piped.out, single.out);
}

TEST(PipelineCli, BadSplitsAreErrors) {
  struct Case {
    std::string ranks_and_flags, says;
  };
  const std::vector<Case> cases{
      {"-np 3 --tensor-split 1,0,1", "rank 1 gets none of the 5 layers"},
      {"-np 2 --tensor-split 1,1,1", "3 shares for a pipeline of 2 ranks"},
      {"-np 6", "5 layers cannot be split among 6 ranks"},
      {"-np 2 -ngl 2", "--n-gpu-layers and --device are not implemented with it"},
  };
  for (const Case& c : cases) {
    const size_t flags = c.ranks_and_flags.find(" -", 1);
    const CliResult r = mpirun(c.ranks_and_flags.substr(0, flags) + " " + kCli + " logits -m " + kStories +
                                   " --tokens 1 -o /dev/null --pipeline" +
                                   (flags == std::string::npos ? "" : c.ranks_and_flags.substr(flags)),
                               120);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.ranks_and_flags << ":\n" << r.out;
  }
}

// A rank whose decode fails (here its cache is smaller than rank 0's: -c differs) sends its Error
// to rank 0, which reports it and ends the job; nothing hangs.
TEST(PipelineCli, AFailedStageEndsTheJobWithItsError) {
  const std::string run = kCli + " run -m " + kStories + " -p Hello -n 4 --temp 0 --pipeline";
  const CliResult r = mpirun("-np 1 " + run + " -c 64 : -np 1 " + run + " -c 32", 120);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("tessera: error: rank 1 of 2: KV cells: 64 cells given for a cache of 32"),
            std::string::npos)
      << r.out;

  // A rank that cannot load its stage (a file cut short) ends every rank at once.
  const std::string cut = temp_file("cut.gguf");
  {
    const std::string bytes = read_file(kStories);
    std::ofstream(cut, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 4096));
  }
  const std::string logits = " logits --tokens \"1 2 3\" -o /dev/null --pipeline -m ";
  const CliResult l = mpirun("-np 1 " + kCli + logits + kStories + " : -np 1 " + kCli + logits + cut, 120);
  EXPECT_NE(l.code, 0) << l.out;
  EXPECT_NE(l.code, 124) << "the job hung:\n" << l.out;
  EXPECT_NE(l.out.find("tessera: error: rank 1 of 2:"), std::string::npos) << l.out;
  std::remove(cut.c_str());
}

// A llama of 8 layers of 2048-wide F32 weights (1.64 GB) with stories260K's vocabulary.
std::string write_large_model() {
  const std::string path = temp_file("large.gguf");
  const tessera::gguf::File src = tessera::gguf::File::open(kStories);
  tessera::gguf::Writer w;
  for (const auto& [key, value] : src.kvs())
    if (key != "general.alignment") w.set(key, value);
  const int64_t n_embd = 2048, n_ff = 5632, n_vocab = 512, n_layer = 8;
  w.set("llama.embedding_length", tessera::gguf::Value(static_cast<uint32_t>(n_embd)));
  w.set("llama.feed_forward_length", tessera::gguf::Value(static_cast<uint32_t>(n_ff)));
  w.set("llama.attention.head_count", tessera::gguf::Value(uint32_t{16}));
  w.set("llama.attention.head_count_kv", tessera::gguf::Value(uint32_t{16}));
  w.set("llama.block_count", tessera::gguf::Value(static_cast<uint32_t>(n_layer)));
  w.set("llama.rope.dimension_count", tessera::gguf::Value(uint32_t{128}));
  constexpr uint32_t kF32 = 0;
  const auto add = [&](const std::string& name, std::vector<int64_t> ne, float scale) {
    const uint64_t seed = std::hash<std::string>{}(name);
    w.add_tensor_deferred(name, kF32, ne, [seed, scale](std::span<std::byte> out) {
      auto* f = reinterpret_cast<float*>(out.data());
      uint64_t s = seed | 1;
      for (size_t i = 0; i < out.size() / sizeof(float); ++i) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        f[i] = scale == 0.0f ? 1.0f : scale * (static_cast<float>(s >> 40) / 8388608.0f - 1.0f);
      }
    });
  };
  add("token_embd.weight", {n_embd, n_vocab}, 1.0f);
  add("output_norm.weight", {n_embd}, 0.0f);
  add("output.weight", {n_embd, n_vocab}, 0.05f);
  for (int64_t il = 0; il < n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"})
      add(b + m + ".weight", {n_embd, n_embd}, 0.03f);
    add(b + "attn_norm.weight", {n_embd}, 0.0f);
    add(b + "ffn_norm.weight", {n_embd}, 0.0f);
    add(b + "ffn_gate.weight", {n_embd, n_ff}, 0.03f);
    add(b + "ffn_up.weight", {n_embd, n_ff}, 0.03f);
    add(b + "ffn_down.weight", {n_ff, n_embd}, 0.02f);
  }
  w.write(path);
  return path;
}

// Each rank reads only its own layers: under an address-space limit (ulimit -v) of 1/1.6 of the
// file, one process cannot map the model and says so; two ranks under the same limit each run
// their half and give the unlimited single process's logits.
TEST(PipelineCli, ModelLargerThanARanksMemoryRunsOnTwoRanks) {
  const std::string model = write_large_model();
  const long file_kib = static_cast<long>(tessera::gguf::File::open(model).file_size() / 1024);
  const long limit_kib = file_kib * 10 / 16;
  const std::string limited = "sh -c 'ulimit -v " + std::to_string(limit_kib) + " && exec \"$0\" \"$@\"' ";
  const std::string tokens = " --tokens \"1 17 300 42\" ";
  const std::string one = temp_file("one.bin"), two = temp_file("two.bin");

  const CliResult cramped =
      run_cli("logits -m " + model + tokens + "-o " + one, "ulimit -v " + std::to_string(limit_kib) + ";");
  EXPECT_EQ(cramped.code, 1) << cramped.out;
  EXPECT_NE(cramped.out.find("tessera: error:"), std::string::npos) << cramped.out;

  const CliResult single = run_cli("logits -m " + model + tokens + "-o " + one);
  ASSERT_EQ(single.code, 0) << single.out;
  const CliResult piped = mpirun("-x MALLOC_ARENA_MAX=2 -np 2 " + limited + kCli + " logits -m " + model +
                                 tokens + "-o " + two + " --pipeline");
  EXPECT_EQ(piped.code, 0) << piped.out;
  EXPECT_TRUE(read_file(one) == read_file(two)) << "the logits differ";
  std::remove(model.c_str());
  std::remove(one.c_str());
  std::remove(two.c_str());
}

#else

TEST(PipelineCli, ABuildWithoutMpiRefusesPipeline) {
  const CliResult r = run_cli("logits -m " + kStories + " --tokens 1 -o /dev/null --pipeline");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("this build of Tessera has no MPI (configure with -DTESSERA_MPI=ON)"),
            std::string::npos)
      << r.out;
}

#endif

}  // namespace
