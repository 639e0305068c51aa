#pragma once
// Continuous batching: many generations share one Model, one Session and its KvCache. A thread of
// the engine's own runs steps; each step decodes one Batch holding the next token of every
// generating sequence plus a bounded chunk of pending prompt tokens, so running generations keep
// their pace while a long prompt is read. Requests join and leave between steps; when every slot
// is busy they wait in a bounded queue.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/llm/generator.h"
#include "tessera/llm/grammar.h"
#include "tessera/llm/harmony.h"
#include "tessera/llm/model.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"
#include "tessera/llm/vocab_trie.h"

namespace tessera::llm {

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason reason) noexcept;  // "stop", "length", ...

struct GenerationParams {
  SamplerOptions sampling;
  int max_tokens = 128;           // generated tokens at most (the slot's context bounds it too)
  std::vector<std::string> stop;  // strings that end the generation; never part of the text
  bool stop_at_eos = true;        // end at an end-of-generation token (EOS, EOT, ...); never emitted
  // Who may reuse the cells this generation leaves in its slot. A request reuses a slot's prefix
  // (cached_tokens, fewer prompt tokens to decode) only when both carry the same scope; from any
  // other scope it reads its whole prompt into a cleared slot, so neither its cached_tokens nor
  // its timing tells anything of another scope's prompts. The server sets it per client (a hash
  // of the API key, the address and an optional salt). Empty is a scope like any other: requests
  // without one share with each other only.
  std::string cache_scope;
  // Constrained sampling: the compiled grammar, shared by any number of generations (each keeps
  // its own matching state). Only tokens that keep the text inside it are sampled, an
  // end-of-generation token only where the text is complete, and the generation ends (stop) as
  // soon as the text is complete and nothing else may follow. A grammar that lets no token of
  // the vocabulary continue ends the generation with an error.
  std::shared_ptr<const Grammar> grammar;
  // The reply is Harmony (gpt-oss; llm::uses_harmony): its control tokens structure it into
  // messages. The text handed out is then the final channel's (to no recipient) only, and the end's
  // update carries the analysis channel (`reasoning`) and the tool calls. Stop strings and a
  // grammar are refused with it (Error(InvalidArgument)): they would read or cut text that is not
  // the answer.
  bool harmony = false;
};

// What a generation has produced since the last poll() or take().
struct GenerationUpdate {
  std::string text;  // new text: stop strings and incomplete UTF-8 are held back until settled
  // The same text as the engine settled it, one piece per step (a stream sends one event each, so
  // how many a client sees does not depend on how often it polls).
  std::vector<std::string> pieces;
  bool done = false;
  FinishReason finish = FinishReason::None;
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens reused from what the slot already held
  int completion_tokens = 0;
  std::string error;  // when finish is Error
  // A Harmony generation's end (GenerationParams::harmony): its analysis text and its tool calls.
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
};

class Engine;

// One request's handle, shared by the requester and the engine. A requester reads it one way:
// poll()/wait(), or subscribe() and take(); each hands out a piece once.
class Generation {
 public:
  // Waits up to `timeout` for new text or the end; returns what arrived (possibly nothing).
  GenerationUpdate poll(std::chrono::milliseconds timeout);
  // Waits for the end; returns the whole text.
  GenerationUpdate wait();
  // What arrived since the last take() or poll(), without waiting: poll(0ms).
  GenerationUpdate take();
  // Push instead of poll: `notify` runs each time new settled pieces or the end become available,
  // and once inside subscribe() when something is already pending or the generation has ended.
  // It runs on the engine thread (or on the subscribing one, inside subscribe()), with no lock
  // held, never concurrently with itself; calls may coalesce, so one take() may find what several
  // announced, or nothing. It must not block or throw; it may call take(), cancel(), subscribe()
  // and Engine::submit(). The generation keeps `notify` until it is replaced (an empty function
  // unsubscribes) or the Generation is destroyed, and a call may still be under way when
  // subscribe() returns, so it must own what it touches (by value or shared_ptr), not point into
  // the subscriber; it reaches the Generation itself by weak_ptr (a shared_ptr would be a cycle).
  // With `pieces` false only the end is announced (the text waits for one take()): a reply sent
  // whole needs no call per token, each of which wakes the subscriber's thread from the engine's.
  void subscribe(std::function<void()> notify, bool pieces = true);
  // Stops the generation at the next step; its cells are freed then.
  void cancel() noexcept { cancelled_.store(true); }
  bool cancelled() const noexcept { return cancelled_.load(); }

 private:
  friend class Engine;
  void push(const std::string& text);
  // What a Harmony reply held besides its answer; before finish().
  void set_structure(std::string reasoning, std::vector<ToolCall> tool_calls);
  void finish(FinishReason reason, const std::string& error = {});
  GenerationUpdate drain();  // mutex_ held
  // Calls notify_ (mutex_ held on entry, released on return), or leaves it to the call under way.
  void signal(std::unique_lock<std::mutex>& lock) noexcept;

  std::vector<Token> prompt_;
  GenerationParams params_;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> pending_;  // settled pieces not yet polled
  GenerationUpdate state_;            // counts and the end; text unused
  std::shared_ptr<const std::function<void()>> notify_;
  bool notify_pieces_ = true;  // notify_ hears of new pieces, not only of the end
  bool notifying_ = false;     // a call of notify_ is under way
  bool renotify_ = false;      // something arrived during it: call again
};

struct EngineOptions {
  int n_slots = 1;  // sequences decoded together
  int64_t n_ctx =
      0;  // KV cells in all; each slot may hold n_ctx / n_slots (0: 4096 per slot, capped at the model's)
  int n_threads = 0;           // CPU threads (0: all cores)
  size_t max_queue = 64;       // requests that may wait while every slot is busy; submit() refuses beyond
  int64_t prompt_chunk = 128;  // prompt tokens read per step, all slots together
  // The first stage of a pipeline (mpi/pipeline.h): the engine's session sends each step's hidden
  // states down this link and samples from the logits it brings back (Session::set_stage_link).
  StageLink* stage_link = nullptr;
};

// Counters for /metrics; a snapshot.
struct EngineStats {
  int active_slots = 0;
  size_t queue_depth = 0;
  int64_t kv_cells_used = 0;
  int64_t kv_cells = 0;
  uint64_t prompt_tokens = 0;     // prompt tokens decoded (reused prefixes not counted)
  uint64_t generated_tokens = 0;  // tokens sampled
  uint64_t steps = 0;
  double decode_seconds = 0.0;  // time spent in decode
  size_t activation_bytes = 0;  // intermediates and inputs the session holds (grows to the largest step)
};

class Engine {
 public:
  Engine(const Model& model, const Vocab& vocab, const EngineOptions& options = {});
  // The session an engine with these options decodes in (its cells, their placement, its micro-batch
  // and its reserve): a later pipeline stage decodes the engine's steps in one made alike, so that
  // its cells stay where the first stage's are. Error(InvalidArgument) on options the engine refuses.
  static std::unique_ptr<Session> make_session(const Model& model, const EngineOptions& options);
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a generation. nullptr when the queue is full. Error(InvalidArgument) on an empty prompt,
  // a prompt that leaves no room in a slot's context, token ids (prompt or logit_bias) outside the
  // vocabulary, max_tokens <= 0, an empty stop string or sampling options the Sampler refuses.
  std::shared_ptr<Generation> submit(std::vector<Token> prompt, const GenerationParams& params);

  // Cancels every generation (running and queued) and stops the thread; later submits end at
  // once, cancelled. Idempotent.
  void shutdown();

  int64_t slot_ctx() const noexcept { return slot_ctx_; }
  int n_slots() const noexcept { return static_cast<int>(slots_.size()); }
  EngineStats stats() const;

 private:
  struct Slot {
    SeqId seq = 0;
    std::vector<Token> held;  // the tokens this sequence holds in the cache, positions 0..
    std::string scope;        // the cache_scope `held` was read under: only it may reuse them
    std::shared_ptr<Generation> job;
    std::unique_ptr<Sampler> sampler;
    std::optional<GenerationRules> rules;  // ends, stop strings and the settled text
    std::optional<HarmonyTokens> harmony;  // a Harmony reply's structure (GenerationParams::harmony)
    size_t fed = 0;                        // prompt tokens in the cache
    Token next = kNoToken;                 // sampled, to be decoded at the next step (generating when set)
  };

  void loop();
  // Moves queued requests into free slots; cancelled ones go to `dropped`, to finish unlocked.
  void admit(std::vector<std::shared_ptr<Generation>>& dropped);
  void step();
  // Handles one sampled token; returns true when the slot's generation ended.
  bool accept_token(Slot& slot, Token token);
  void release(Slot& slot, FinishReason reason, const std::string& error = {});

  const Vocab& vocab_;
  std::shared_ptr<const VocabTrie> trie_;  // built at the first generation with a grammar
  EngineOptions options_;
  int64_t slot_ctx_ = 0;
  std::unique_ptr<Session> session_;
  std::vector<Slot> slots_;

  mutable std::mutex mutex_;  // guards queue_, stop_ and the counters below
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Generation>> queue_;
  bool stop_ = false;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace tessera::llm
