// The continuous-batching engine on stories260K: greedy text equals a plain Session's, alone and
// among 7 concurrent requests; stop strings across token boundaries; the bounded queue;
// cancellation frees cells; prefix reuse within a cache scope only; subscribers; bad requests.
#include "tessera/llm/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "support/stories_model.h"
#include "tessera/error.h"
#include "tessera/llm/harmony.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

class EngineTest : public testing_support::StoriesModelTest {
 protected:
  static GenerationParams greedy(int max_tokens = 40) {
    GenerationParams p;
    p.sampling.temperature = 0.0f;
    p.max_tokens = max_tokens;
    return p;
  }
  static std::vector<Token> encode(const std::string& s) { return vocab_->encode(s, true); }
};

const std::vector<std::string> kPrompts = {
    "Once upon a time",         "The little dog", "Lily and Tom went to the park",
    "One day, a big bear",      "The sun was",    "There was a girl named Sue who liked",
    "A bird sat on a tree and", "Mom said to Ben"};

}  // namespace

TEST_F(EngineTest, GreedyAloneMatchesThePlainSession) {
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  const auto r = engine.submit(encode("Once upon a time"), greedy())->wait();
  EXPECT_EQ(r.finish, FinishReason::Length);
  EXPECT_EQ(r.completion_tokens, 40);
  EXPECT_EQ(r.prompt_tokens, static_cast<int>(encode("Once upon a time").size()));
  EXPECT_EQ(r.text.rfind(", there was a little girl named Lily. She loved to play outside in the park.", 0),
            0u)
      << r.text;
  EXPECT_EQ(r.text, greedy_reference("Once upon a time", 40));
}

TEST_F(EngineTest, EightConcurrentRequestsGiveTheirAloneText) {
  std::vector<std::string> alone;
  for (const auto& p : kPrompts) alone.push_back(greedy_reference(p, 48));
  // Small prompt chunks so that prompts are read over several steps while others generate.
  Engine engine(*model_, *vocab_, {.n_slots = 8, .n_ctx = 8 * 128, .prompt_chunk = 5});
  std::vector<std::shared_ptr<Generation>> jobs;
  for (const auto& p : kPrompts) jobs.push_back(engine.submit(encode(p), greedy(48)));
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(jobs[i]->wait().text, alone[i]) << kPrompts[i];
  EXPECT_EQ(engine.stats().active_slots, 0);
  EXPECT_EQ(engine.stats().generated_tokens, 8u * 48u);
}

TEST_F(EngineTest, StreamedPiecesConcatenateToTheText) {
  Engine engine(*model_, *vocab_, {.n_slots = 2, .n_ctx = 512});
  // Long enough (some 50 ms here) that the polling thread wakes more than once even when the
  // machine is busy (30 tokens, 10 ms, could all land before it was scheduled under ctest -j2).
  constexpr int kTokens = 200;
  auto job = engine.submit(encode("Once upon a time"), greedy(kTokens));
  std::string streamed;
  int polls_with_text = 0;
  for (;;) {
    auto u = job->poll(std::chrono::milliseconds(500));
    if (!u.text.empty()) ++polls_with_text;
    streamed += u.text;
    if (u.done) break;
  }
  EXPECT_EQ(streamed, greedy_reference("Once upon a time", kTokens));
  EXPECT_GT(polls_with_text, 1);  // text arrives as it is generated, not at the end only
}

// Offsets of `text` that fall inside a well-formed multi-byte UTF-8 character (after its lead
// byte): a streamed piece must never end there. Checked by hand-decoding, independently of
// TokenStreamer.
std::vector<bool> inside_a_character(const std::string& text) {
  std::vector<bool> inside(text.size() + 1, false);
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
    bool whole = i + n <= text.size();
    for (size_t k = 1; whole && k < n; ++k) whole = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (n > 1 && whole) {
      for (size_t k = 1; k < n; ++k) inside[i + k] = true;
      i += n;
    } else {
      ++i;
    }
  }
  return inside;
}

TEST_F(EngineTest, StreamedPiecesNeverSplitACharacter) {
  // Hot sampling draws stories260K's byte tokens (<0xE2>, <0x82>, ...): pieces that end inside a
  // character. Each text update handed out must end on a character boundary.
  Engine engine(*model_, *vocab_, {.n_slots = 2, .n_ctx = 2048});
  GenerationParams p;
  p.sampling.temperature = 100.0f;  // nearly uniform: about one token pair in 140 is a 2-byte character
  p.sampling.top_k = 0;             // every token may be drawn
  p.sampling.top_p = 1.0f;
  p.sampling.min_p = 0.0f;
  p.sampling.seed = 11;
  p.max_tokens = 1000;
  p.stop_at_eos = false;
  auto job = engine.submit(encode("Once upon a time"), p);
  std::string text;
  std::vector<size_t> ends;
  GenerationUpdate u;
  do {
    u = job->poll(std::chrono::milliseconds(1));
    if (!u.text.empty()) ends.push_back((text += u.text).size());
  } while (!u.done);
  ASSERT_EQ(u.finish, FinishReason::Length);
  const std::vector<bool> inside = inside_a_character(text);
  const size_t multibyte = static_cast<size_t>(std::count(inside.begin(), inside.end(), true));
  ASSERT_GE(multibyte, 3u) << "the sample holds too few multi-byte characters: the test proves nothing";
  for (size_t end : ends) EXPECT_FALSE(inside[end]) << "a piece ends inside a character at byte " << end;
}

TEST_F(EngineTest, PromptChunkBoundsThePromptTokensReadPerStep) {
  std::vector<Token> prompt = encode(
      "Once upon a time there was a little girl named Lily. She loved to play "
      "outside in the park. One day, she saw a big, red ball and ran after it");
  ASSERT_GE(prompt.size(), 40u);
  prompt.resize(40);
  for (const auto& [chunk, steps] : std::vector<std::pair<int64_t, uint64_t>>{{8, 5}, {16, 3}, {128, 1}}) {
    Engine engine(*model_, *vocab_, {.n_slots = 2, .n_ctx = 256, .prompt_chunk = chunk});
    // One token: the step that reads the prompt's last chunk samples it, and the generation ends.
    const auto r = engine.submit(prompt, greedy(1))->wait();
    EXPECT_EQ(r.completion_tokens, 1);
    EXPECT_EQ(engine.stats().steps, steps) << "chunk " << chunk;
    EXPECT_EQ(engine.stats().prompt_tokens, 40u);
  }
}

TEST_F(EngineTest, StopStringsAcrossTokensEndTheTextAndAreNotEmitted) {
  const std::string full = greedy_reference("Once upon a time", 40);
  ASSERT_NE(full.find("little girl"), std::string::npos);
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  GenerationParams p = greedy();
  p.stop = {"tle gi", "never there"};  // the first spans " little" and " girl"
  auto job = engine.submit(encode("Once upon a time"), p);
  std::string streamed;
  GenerationUpdate u;
  do {
    u = job->poll(std::chrono::milliseconds(500));
    streamed += u.text;
  } while (!u.done);
  EXPECT_EQ(u.finish, FinishReason::Stop);
  EXPECT_EQ(streamed, full.substr(0, full.find("tle gi")));
  EXPECT_EQ(streamed, ", there was a lit");
}

TEST_F(EngineTest, FullQueueRefusesAtOnceAndCancelFreesCells) {
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256, .max_queue = 1});
  GenerationParams long_run = greedy(200);
  long_run.stop_at_eos = false;
  auto a = engine.submit(encode("Once upon a time"), long_run);
  ASSERT_NE(a, nullptr);
  // Wait until a holds the slot (it has produced text), so that the queue is empty.
  std::string got;
  while (got.empty()) got += a->poll(std::chrono::milliseconds(500)).text;
  auto b = engine.submit(encode("The little dog"), greedy(5));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(engine.stats().queue_depth, 1u);
  EXPECT_EQ(engine.submit(encode("The sun was"), greedy(5)), nullptr);  // queue full
  a->cancel();
  const auto ra = a->wait();
  EXPECT_EQ(ra.finish, FinishReason::Cancelled);
  EXPECT_LT(ra.completion_tokens, 200);
  const auto rb = b->wait();
  EXPECT_EQ(rb.finish, FinishReason::Length);
  EXPECT_EQ(rb.text, greedy_reference("The little dog", 5));
  // b finished and keeps its prompt and 4 decoded tokens for reuse; a's cells were all freed.
  EXPECT_EQ(engine.stats().kv_cells_used, static_cast<int64_t>(encode("The little dog").size()) + 4);
  EXPECT_EQ(engine.stats().queue_depth, 0u);
}

TEST_F(EngineTest, WithoutAQueueFreeSlotsStillTakeRequests) {
  Engine engine(*model_, *vocab_, {.n_slots = 2, .n_ctx = 512, .max_queue = 0});
  GenerationParams long_run = greedy(250);
  long_run.stop_at_eos = false;
  auto a = engine.submit(encode("Once upon a time"), long_run);
  auto b = engine.submit(encode("The sun was"), long_run);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::string got;
  while (got.empty()) got += b->poll(std::chrono::milliseconds(500)).text;
  EXPECT_EQ(engine.submit(encode("The little dog"), greedy(5)), nullptr);  // both slots busy
  a->cancel();
  b->cancel();
  EXPECT_EQ(a->wait().finish, FinishReason::Cancelled);
  EXPECT_EQ(b->wait().finish, FinishReason::Cancelled);
  auto c = engine.submit(encode("The little dog"), greedy(5));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->wait().text, greedy_reference("The little dog", 5));
}

TEST_F(EngineTest, ANewRequestReusesThePrefixItsSlotHolds) {
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  const auto first = encode("Once upon a time");
  const auto r1 = engine.submit(first, greedy(10))->wait();
  EXPECT_EQ(r1.cached_tokens, 0);
  // The second prompt continues the first conversation: prompt + reply + more.
  const std::string second_text = "Once upon a time" + r1.text + " The end. Then";
  const auto second = encode(second_text);
  const auto r2 = engine.submit(second, greedy(20))->wait();
  // At least the first prompt is reused (the reply's tokens too, where the joined text
  // tokenizes the same at the seam); the text is what a fresh session gives.
  EXPECT_GE(r2.cached_tokens, static_cast<int>(first.size()));
  EXPECT_LT(r2.cached_tokens, static_cast<int>(second.size()));
  EXPECT_EQ(r2.text, greedy_reference(second_text, 20));
}

TEST_F(EngineTest, BadRequestsAreErrors) {
  Engine engine(*model_, *vocab_, {.n_slots = 2, .n_ctx = 64});
  EXPECT_EQ(engine.slot_ctx(), 32);
  EXPECT_THROW(engine.submit({}, greedy()), Error);
  EXPECT_THROW(engine.submit(encode("Hi"), greedy(0)), Error);
  EXPECT_THROW(engine.submit(std::vector<Token>(33, 100), greedy()), Error);
  EXPECT_THROW(engine.submit({1, 999999}, greedy()), Error);
  GenerationParams bad = greedy();
  bad.sampling.top_p = 0.0f;
  EXPECT_THROW(engine.submit(encode("Hi"), bad), Error);
  bad = greedy();
  bad.sampling.logit_bias = {{static_cast<int32_t>(vocab_->size()), 1.0f}};  // one past the vocabulary
  EXPECT_THROW(engine.submit(encode("Hi"), bad), Error);
  bad.sampling.logit_bias = {{5, 101.0f}};
  EXPECT_THROW(engine.submit(encode("Hi"), bad), Error);
  bad.sampling.logit_bias = {{static_cast<int32_t>(vocab_->size()) - 1, -100.0f}};  // the last id is fine
  EXPECT_NE(engine.submit(encode("Hi"), bad), nullptr);
  bad = greedy();
  bad.sampling.frequency_penalty = 2.5f;
  EXPECT_THROW(engine.submit(encode("Hi"), bad), Error);
  // A prompt that fills the slot's context gets one token and ends with length.
  const auto r = engine.submit(std::vector<Token>(32, 100), greedy())->wait();
  EXPECT_EQ(r.finish, FinishReason::Length);
  EXPECT_EQ(r.completion_tokens, 1);
  EXPECT_THROW(Engine(*model_, *vocab_, {.n_slots = 0}), Error);
}

TEST_F(EngineTest, ACacheScopeReusesOnlyItsOwnPrefix) {
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  const auto prompt = encode("Once upon a time there was a dog");
  const int n = static_cast<int>(prompt.size());
  const std::string expected = greedy_reference("Once upon a time there was a dog", 8);
  // Runs the prompt under `scope`; returns cached_tokens and checks the prompt tokens decoded.
  auto run = [&](const std::string& scope) {
    GenerationParams p = greedy(8);
    p.cache_scope = scope;
    const uint64_t before = engine.stats().prompt_tokens;
    const auto r = engine.submit(prompt, p)->wait();
    EXPECT_EQ(r.text, expected) << scope;
    // Not faster for another scope's cells: every uncached prompt token is decoded again.
    EXPECT_EQ(engine.stats().prompt_tokens - before, static_cast<uint64_t>(n - r.cached_tokens)) << scope;
    return r.cached_tokens;
  };
  EXPECT_EQ(run("alice"), 0);
  EXPECT_EQ(run("bob"), 0);      // the slot holds alice's prompt: not bob's to reuse
  EXPECT_EQ(run("bob"), n - 1);  // bob's own (the last token is read again for its logits)
  EXPECT_EQ(run("alice"), 0);    // bob overwrote the slot
  EXPECT_EQ(run(""), 0);         // no scope is a scope of its own
  EXPECT_EQ(run(""), n - 1);
}

TEST_F(EngineTest, EachScopeKeepsReusingItsOwnSlotAcrossTurns) {
  // Two clients in two slots, turns interleaved: each new scope takes the empty slot rather than
  // the other's, and every later turn re-reads only what is new.
  Engine engine(*model_, *vocab_, {.n_slots = 2, .n_ctx = 512});
  std::map<std::string, std::string> chat = {{"alice", "Once upon a time"}, {"bob", "The little dog"}};
  std::map<std::string, size_t> previous;  // each scope's previous prompt, in tokens
  for (int turn = 0; turn < 3; ++turn) {
    for (auto& [scope, text] : chat) {
      GenerationParams p = greedy(6);
      p.cache_scope = scope;
      const auto tokens = encode(text);
      const auto r = engine.submit(tokens, p)->wait();
      EXPECT_EQ(r.text, greedy_reference(text, 6)) << scope << " turn " << turn;
      if (turn == 0) {
        EXPECT_EQ(r.cached_tokens, 0) << scope;
      } else {
        // At least the previous turn's prompt: the other scope's turn in between did not evict it.
        EXPECT_GE(r.cached_tokens, static_cast<int>(previous[scope])) << scope << " turn " << turn;
        EXPECT_LT(r.cached_tokens, static_cast<int>(tokens.size())) << scope << " turn " << turn;
      }
      previous[scope] = tokens.size();
      text += r.text + " Then";
    }
  }
}

namespace {

// A subscriber's side: counts the notifies; the test thread waits on them (no poll anywhere).
struct Inbox {
  std::mutex m;
  std::condition_variable cv;
  int notifies = 0;
  void notify() {
    {
      std::lock_guard lock(m);
      ++notifies;
    }
    cv.notify_all();
  }
  int count() {
    std::lock_guard lock(m);
    return notifies;
  }
  // Waits for a notify past the `seen`-th; false when none comes in 60 s.
  bool wait_past(int& seen) {
    std::unique_lock lock(m);
    if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return notifies > seen; })) return false;
    seen = notifies;
    return true;
  }
};

}  // namespace

TEST_F(EngineTest, ASubscriberTakesEveryPieceAndTheEndWithoutPolling) {
  Engine engine(*model_, *vocab_, {.n_slots = 2, .n_ctx = 512});
  GenerationParams p;
  p.sampling.temperature = 0.8f;
  p.sampling.seed = 9;
  p.sampling.presence_penalty = 0.5f;
  p.sampling.frequency_penalty = 0.25f;
  p.max_tokens = 200;
  p.stop_at_eos = false;
  const auto expected = engine.submit(encode("Once upon a time"), p)->wait();
  ASSERT_EQ(expected.completion_tokens, 200);

  auto inbox = std::make_shared<Inbox>();
  auto job = engine.submit(encode("Once upon a time"), p);
  job->subscribe([inbox] { inbox->notify(); });
  std::string text, joined;
  int seen = 0, updates_with_text = 0;
  GenerationUpdate u;
  while (!u.done) {
    ASSERT_TRUE(inbox->wait_past(seen)) << "no notify for 60 s";
    u = job->take();
    text += u.text;
    for (const std::string& piece : u.pieces) joined += piece;
    updates_with_text += !u.text.empty();
  }
  EXPECT_EQ(u.finish, FinishReason::Length);
  EXPECT_EQ(u.completion_tokens, 200);
  EXPECT_EQ(text, expected.text);
  EXPECT_EQ(joined, text);
  EXPECT_GT(updates_with_text, 1);  // pieces are pushed as they settle, not at the end only
  EXPECT_TRUE(job->take().text.empty());
}

// A subscriber of the end only (a reply sent whole) is called once, at the end, and takes the
// whole text then.
TEST_F(EngineTest, ASubscriberOfTheEndOnlyIsCalledOnceWithTheWholeText) {
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  auto inbox = std::make_shared<Inbox>();
  auto job = engine.submit(encode("Once upon a time"), greedy(30));
  job->subscribe([inbox] { inbox->notify(); }, false);
  int seen = 0;
  ASSERT_TRUE(inbox->wait_past(seen)) << "no notify for 60 s";
  const GenerationUpdate u = job->take();
  EXPECT_TRUE(u.done);
  EXPECT_EQ(u.finish, FinishReason::Length);
  EXPECT_EQ(u.completion_tokens, 30);
  EXPECT_EQ(u.text, greedy_reference("Once upon a time", 30));
  EXPECT_EQ(inbox->count(), 1);
  // Subscribing for pieces again after the end: told once more, of the end.
  job->subscribe([inbox] { inbox->notify(); });
  EXPECT_EQ(inbox->count(), 2);
}

TEST_F(EngineTest, SubscribingAfterTheEndNotifiesOnce) {
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  auto job = engine.submit(encode("Once upon a time"), greedy(10));
  EXPECT_EQ(job->wait().text, greedy_reference("Once upon a time", 10));
  auto first = std::make_shared<Inbox>();
  job->subscribe([first] { first->notify(); });
  EXPECT_EQ(first->count(), 1);  // inside subscribe(): the end is already there
  const auto u = job->take();
  EXPECT_TRUE(u.done);
  EXPECT_EQ(u.finish, FinishReason::Length);
  EXPECT_EQ(u.completion_tokens, 10);
  EXPECT_TRUE(u.text.empty());  // wait() had it all
  // A replacement is told once too; the one it replaced is not called again.
  auto second = std::make_shared<Inbox>();
  job->subscribe([second] { second->notify(); });
  EXPECT_EQ(second->count(), 1);
  // A request submitted while stopping ends at once, and its subscriber hears of it once.
  engine.shutdown();
  auto late = engine.submit(encode("The sun was"), greedy(5));
  auto third = std::make_shared<Inbox>();
  late->subscribe([third] { third->notify(); });
  EXPECT_EQ(third->count(), 1);
  EXPECT_EQ(late->take().finish, FinishReason::Cancelled);
  EXPECT_EQ(first->count(), 1);
  EXPECT_EQ(second->count(), 1);
}

TEST_F(EngineTest, NotifyRunsWithoutTheEnginesLock) {
  // A queued request cancelled while it waits is finished by the engine thread; its subscriber
  // reads the engine's stats from the notify, which would deadlock under the engine's lock.
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  GenerationParams long_run = greedy(250);
  long_run.stop_at_eos = false;
  auto a = engine.submit(encode("Once upon a time"), long_run);
  std::string got;
  while (got.empty()) got += a->poll(std::chrono::milliseconds(500)).text;  // a holds the slot
  auto b = engine.submit(encode("The little dog"), greedy(5));
  auto inbox = std::make_shared<Inbox>();
  auto depth = std::make_shared<std::atomic<size_t>>(99);
  Engine* e = &engine;  // the engine joins its thread before it goes, so it outlives every notify
  b->subscribe([inbox, depth, e] {
    depth->store(e->stats().queue_depth);
    inbox->notify();
  });
  b->cancel();
  int seen = 0;
  ASSERT_TRUE(inbox->wait_past(seen)) << "no notify for 60 s";
  const auto rb = b->take();
  EXPECT_TRUE(rb.done);
  EXPECT_EQ(rb.finish, FinishReason::Cancelled);
  EXPECT_EQ(depth->load(), 0u);  // b had left the queue when it was told
  a->cancel();
  EXPECT_EQ(a->wait().finish, FinishReason::Cancelled);
}

TEST_F(EngineTest, ANotifyMayOutliveItsSubscribersHandle) {
  Engine engine(*model_, *vocab_, {.n_slots = 1, .n_ctx = 256});
  auto calls = std::make_shared<std::atomic<int>>(0);
  {
    auto job = engine.submit(encode("Once upon a time"), greedy(30));
    job->subscribe([calls] { ++*calls; });
  }  // the subscriber is gone; the engine still holds the generation and calls what it owns
  // The slot is taken until the first ends, so when the second has ended the first has notified.
  const auto r = engine.submit(encode("The sun was"), greedy(3))->wait();
  EXPECT_EQ(r.finish, FinishReason::Length);
  EXPECT_GE(calls->load(), 1);
}

namespace {

// stories260K's vocabulary with some of the ids its greedy reply samples renamed, so that the
// reply reads as Harmony: `renames[k]` (when not empty) becomes the text of the k-th sampled id,
// a control token when it is one of Harmony's.
Vocab harmony_vocabulary(const Vocab& original, const std::vector<Token>& ids,
                         const std::vector<std::string>& renames) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  for (Token t = 0; t < static_cast<Token>(original.size()); ++t) {
    tokens.push_back(original.text(t));
    scores.push_back(original.score(t));
    types.push_back(original.type(t));
  }
  for (size_t k = 0; k < renames.size(); ++k) {
    if (renames[k].empty()) continue;
    const auto id = static_cast<size_t>(ids[k]);
    tokens[id] = renames[k];
    types[id] = HarmonyReader::is_structure(renames[k]) ? TokenType::Control : TokenType::Normal;
  }
  return Vocab("llama", tokens, scores, types, original.special());
}

}  // namespace

// A Harmony reply generated by the engine: the model's greedy ids are given Harmony's structure
// (a vocabulary that renames them); the client's text is the final channel, the end's update has
// the analysis and the tool call, and stop strings and grammars are refused by name.
TEST_F(EngineTest, HarmonyRepliesHandOutTheFinalChannelAndTheirCalls) {
  const std::vector<Token> ids = testing_support::greedy_ids(*model_, *vocab_, "Once upon a time", 20);
  // The renamed ids must be distinct from each other and from the ids kept as text.
  ASSERT_EQ(std::set<Token>(ids.begin(), ids.begin() + 18).size(), 18u) << "pick another prompt";
  const auto piece = [&](size_t k) { return vocab_->token_to_piece(ids[k]); };
  const std::vector<std::string> answer = {
      "<|channel|>", "analysis", "<|message|>", "", "", "", "<|end|>",    "<|start|>", "assistant",
      "<|channel|>", "final",    "<|message|>", "", "", "", "<|return|>", "",          "<|call|>"};
  // (Index 17 gives the vocabulary its other end: with both <|return|> and <|call|>, <|end|> ends a
  // message, not the reply.)
  const Vocab harmony = harmony_vocabulary(*vocab_, ids, answer);
  ASSERT_TRUE(harmony.is_end_of_generation(ids[15]));
  GenerationParams p = greedy(40);
  p.harmony = true;
  {
    Engine engine(*model_, harmony, {.n_slots = 2, .n_ctx = 256});
    std::string streamed;
    auto job = engine.submit(vocab_->encode("Once upon a time", true), p);
    GenerationUpdate u;
    do {
      u = job->poll(std::chrono::milliseconds(1000));
      streamed += u.text;
    } while (!u.done);
    EXPECT_EQ(u.finish, FinishReason::Stop);
    EXPECT_EQ(u.completion_tokens, 15);
    EXPECT_EQ(streamed, piece(12) + piece(13) + piece(14));
    EXPECT_EQ(u.reasoning, piece(3) + piece(4) + piece(5));
    EXPECT_TRUE(u.tool_calls.empty());

    GenerationParams stop = p;
    stop.stop = {"x"};
    EXPECT_THROW(engine.submit(vocab_->encode("Once", true), stop), Error);
    GenerationParams grammar = p;
    grammar.grammar = Grammar::parse("root ::= \"a\"");
    EXPECT_THROW(engine.submit(vocab_->encode("Once", true), grammar), Error);
  }

  // The same reply calling a tool instead: no text, the call with its arguments.
  const std::vector<std::string> call = {"<|channel|>",
                                         "analysis",
                                         "<|message|>",
                                         "",
                                         "",
                                         "",
                                         "<|end|>",
                                         "<|start|>",
                                         "assistant to=functions.lookup",
                                         "<|channel|>",
                                         "commentary json",
                                         "<|message|>",
                                         "{\"q\":",
                                         " 7}",
                                         "<|call|>",
                                         "",
                                         "",
                                         "<|return|>"};
  const Vocab calling = harmony_vocabulary(*vocab_, ids, call);
  Engine engine(*model_, calling, {.n_slots = 1, .n_ctx = 256});
  const GenerationUpdate u = engine.submit(vocab_->encode("Once upon a time", true), p)->wait();
  EXPECT_EQ(u.finish, FinishReason::Stop);
  EXPECT_EQ(u.text, "");
  EXPECT_EQ(u.reasoning, piece(3) + piece(4) + piece(5));
  ASSERT_EQ(u.tool_calls.size(), 1u);
  EXPECT_EQ(u.tool_calls[0].name, "lookup");
  EXPECT_EQ(u.tool_calls[0].arguments, "{\"q\":7}");
}
