// The continuous-batching engine: slots, the queue, and the step that decodes every slot's next
// token together with a chunk of pending prompts.
#include "tessera/llm/engine.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "tessera/llm/grammar_matcher.h"

namespace tessera::llm {
namespace {}  // namespace

const char* finish_reason_name(FinishReason reason) noexcept {
  switch (reason) {
    case FinishReason::None:
      return "none";
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "none";
}

GenerationUpdate Generation::drain() {
  GenerationUpdate u = state_;
  u.pieces = std::move(pending_);
  pending_.clear();
  for (const std::string& piece : u.pieces) u.text += piece;
  return u;
}

GenerationUpdate Generation::poll(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || state_.done; });
  return drain();
}

GenerationUpdate Generation::take() {
  std::lock_guard lock(mutex_);
  return drain();
}

void Generation::subscribe(std::function<void()> notify, bool pieces) {
  auto fresh = notify ? std::make_shared<const std::function<void()>>(std::move(notify)) : nullptr;
  std::shared_ptr<const std::function<void()>> old;  // destroyed after the unlock, like every copy
  std::unique_lock lock(mutex_);
  old = std::exchange(notify_, std::move(fresh));
  notify_pieces_ = pieces;
  if (notify_ && ((pieces && !pending_.empty()) || state_.done))
    signal(lock);
  else
    lock.unlock();
}

void Generation::signal(std::unique_lock<std::mutex>& lock) noexcept {
  // One caller at a time runs notify_, unlocked (it may take() or subscribe()); whatever arrives
  // meanwhile asks that caller for one more round instead of running it concurrently.
  if (notifying_) {
    renotify_ = true;
    lock.unlock();
    return;
  }
  // Nobody to tell: no round, so that a subscribe() right after (say, after wait() saw the end)
  // is not left to a round of this thread that it may have replaced by then.
  if (!notify_) {
    lock.unlock();
    return;
  }
  notifying_ = true;
  for (;;) {
    auto notify = notify_;  // a subscribe() during the call replaces it for the next round
    lock.unlock();
    if (notify) (*notify)();
    notify.reset();  // the last owner destroys what the callback holds with no lock held
    lock.lock();
    if (!renotify_) break;
    renotify_ = false;
  }
  notifying_ = false;
  lock.unlock();
}

GenerationUpdate Generation::wait() {
  std::string text;
  for (;;) {
    GenerationUpdate u = poll(std::chrono::milliseconds(1000));
    text += u.text;
    if (u.done) {
      u.text = std::move(text);
      u.pieces.clear();  // the whole text: its pieces went by in earlier polls
      return u;
    }
  }
}

void Generation::push(const std::string& text) {
  if (text.empty()) return;
  std::unique_lock lock(mutex_);
  pending_.push_back(text);
  cv_.notify_all();
  if (notify_pieces_)
    signal(lock);
  else
    lock.unlock();
}

void Generation::set_structure(std::string reasoning, std::vector<ToolCall> tool_calls) {
  std::lock_guard lock(mutex_);
  state_.reasoning = std::move(reasoning);
  state_.tool_calls = std::move(tool_calls);
}

void Generation::finish(FinishReason reason, const std::string& error) {
  std::unique_lock lock(mutex_);
  state_.done = true;
  state_.finish = reason;
  state_.error = error;
  cv_.notify_all();
  signal(lock);
}

std::unique_ptr<Session> Engine::make_session(const Model& model, const EngineOptions& options) {
  if (options.n_slots <= 0)
    raise(ErrorCode::InvalidArgument, "slots must be positive, got {}", options.n_slots);
  if (options.prompt_chunk <= 0)
    raise(ErrorCode::InvalidArgument, "the prompt chunk must be positive, got {}", options.prompt_chunk);
  const int64_t n_slots = options.n_slots;
  const int64_t n_ctx =
      options.n_ctx > 0 ? options.n_ctx : n_slots * std::min<int64_t>(model.hparams().n_ctx_train, 4096);
  const int64_t slot_ctx = n_ctx / n_slots;
  if (slot_ctx < 2)
    raise(ErrorCode::InvalidArgument,
          "a context of {} cells leaves {} per slot for {} slots (at least 2 needed)", n_ctx, slot_ctx,
          n_slots);
  SessionOptions so;
  so.n_ctx = slot_ctx * n_slots;
  so.n_threads = options.n_threads;
  // One step is one micro-batch: every slot's token plus the prompt chunk.
  so.n_batch = n_slots + options.prompt_chunk;
  auto session = std::make_unique<Session>(model, so);
  // Each slot's cells in its own share of the cache: the CPU's attention then reads, per query row,
  // only the span of cells its mask leaves visible, so a step's attention costs each sequence its
  // own cells and not every slot's. A device's attention runs over all cells [0, n_kv) instead,
  // which ranges would only lengthen (a lone slot high up makes n_kv large): none there.
  if (model.device() == nullptr) session->cache().set_seq_ranges(n_slots);
  // The worst step up front (each slot gives at most one logits row a step): memory stays flat
  // however the batches mix later.
  session->reserve(n_slots);
  return session;
}

Engine::Engine(const Model& model, const Vocab& vocab, const EngineOptions& options)
    : vocab_(vocab), options_(options), session_(make_session(model, options)) {
  slot_ctx_ = session_->n_ctx() / options.n_slots;
  if (options.stage_link != nullptr) session_->set_stage_link(options.stage_link);
  slots_.resize(static_cast<size_t>(options.n_slots));
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].seq = static_cast<SeqId>(i);
  stats_.kv_cells = session_->n_ctx();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Generation> Engine::submit(std::vector<Token> prompt, const GenerationParams& params) {
  if (prompt.empty()) raise(ErrorCode::InvalidArgument, "the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) > slot_ctx_)
    raise(ErrorCode::InvalidArgument, "the prompt has {} tokens, more than the context of {} per slot",
          prompt.size(), slot_ctx_);
  if (params.max_tokens <= 0)
    raise(ErrorCode::InvalidArgument, "max_tokens must be positive, got {}", params.max_tokens);
  const int64_t n_vocab = static_cast<int64_t>(vocab_.size());
  for (Token t : prompt)
    if (t < 0 || t >= n_vocab) raise(ErrorCode::InvalidArgument, "token id {} is outside the vocabulary", t);
  for (const auto& [t, bias] : params.sampling.logit_bias)
    if (t >= n_vocab)
      raise(ErrorCode::InvalidArgument, "logit bias for token id {}: outside the vocabulary of {}", t,
            n_vocab);
  for (const std::string& s : params.stop)
    if (s.empty()) raise(ErrorCode::InvalidArgument, "a stop string is empty");
  if (params.harmony && !params.stop.empty())
    raise(ErrorCode::InvalidArgument, "stop strings are not applied to a Harmony reply (gpt-oss)");
  if (params.harmony && params.grammar)
    raise(ErrorCode::InvalidArgument,
          "a grammar is not applied to a Harmony reply (gpt-oss): its channels are not text it could "
          "constrain");
  Sampler check(params.sampling);  // throws on invalid sampling options
  auto job = std::make_shared<Generation>();
  job->prompt_ = std::move(prompt);
  job->params_ = params;
  job->state_.prompt_tokens = static_cast<int>(job->prompt_.size());
  {
    std::lock_guard lock(mutex_);
    if (stop_) {
      job->finish(FinishReason::Cancelled, "the server is stopping");
      return job;
    }
    // Free slots take requests at once; beyond them, max_queue may wait.
    const size_t free_slots = slots_.size() - static_cast<size_t>(stats_.active_slots);
    if (queue_.size() >= options_.max_queue + free_slots) return nullptr;
    queue_.push_back(job);
    stats_.queue_depth = queue_.size();
  }
  cv_.notify_all();
  return job;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Engine::loop() {
  std::unique_lock lock(mutex_);
  std::vector<std::shared_ptr<Generation>> dropped;
  for (;;) {
    if (stop_) break;
    admit(dropped);
    if (!dropped.empty()) {
      // Their subscribers are told with no lock of ours held (they may submit again).
      lock.unlock();
      for (auto& job : dropped) job->finish(FinishReason::Cancelled);
      dropped.clear();
      lock.lock();
      continue;
    }
    const bool busy =
        std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.job != nullptr; });
    if (!busy) {
      // Every slot is free, so admit() left nothing queued: sleep until a submit or shutdown.
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      continue;
    }
    lock.unlock();
    step();
    lock.lock();
  }
  // submit() sees stop_ and queues nothing more.
  std::deque<std::shared_ptr<Generation>> waiting = std::move(queue_);
  queue_.clear();
  stats_.queue_depth = 0;
  lock.unlock();
  for (Slot& s : slots_)
    if (s.job) s.job->finish(FinishReason::Cancelled, "the server is stopping");
  for (auto& job : waiting) job->finish(FinishReason::Cancelled, "the server is stopping");
}

void Engine::admit(std::vector<std::shared_ptr<Generation>>& dropped) {
  // Requests cancelled while they waited leave the queue.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->cancelled()) {
      dropped.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  while (!queue_.empty()) {
    // The free slot that already holds the longest prefix of the prompt read under the same
    // cache scope; another scope's cells count as no prefix at all. Among equals, the slot holding
    // the fewest tokens, so that an empty one goes before a prefix someone may come back for.
    Slot* best = nullptr;
    size_t best_common = 0;
    const std::vector<Token>& prompt = queue_.front()->prompt_;
    const std::string& scope = queue_.front()->params_.cache_scope;
    for (Slot& s : slots_) {
      if (s.job) continue;
      size_t common = 0;
      if (s.scope == scope) {
        const size_t n = std::min(s.held.size(), prompt.size());
        common = static_cast<size_t>(
            std::mismatch(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(n), s.held.begin())
                .first -
            prompt.begin());
      }
      if (best == nullptr || common > best_common ||
          (common == best_common && s.held.size() < best->held.size())) {
        best = &s;
        best_common = common;
      }
    }
    if (best == nullptr) break;
    Slot& s = *best;
    s.job = queue_.front();
    queue_.pop_front();
    // At least the last prompt token is decoded again: its logits give the first token.
    const size_t reuse = std::min(best_common, prompt.size() - 1);
    session_->cache().seq_remove(s.seq, static_cast<Pos>(reuse), -1);
    s.held.resize(reuse);
    s.scope = s.job->params_.cache_scope;
    s.fed = reuse;
    s.next = kNoToken;
    s.rules.emplace(vocab_, s.job->params_.stop, s.job->params_.stop_at_eos, s.job->params_.max_tokens);
    if (s.job->params_.harmony)
      s.harmony.emplace(vocab_, [job = s.job.get()](std::string_view text) { job->push(std::string(text)); });
    std::unique_ptr<GrammarMatcher> matcher;
    if (s.job->params_.grammar) {
      if (!trie_) trie_ = std::make_shared<const VocabTrie>(vocab_);
      matcher = std::make_unique<GrammarMatcher>(s.job->params_.grammar, trie_);
    }
    s.sampler = std::make_unique<Sampler>(s.job->params_.sampling, std::move(matcher));
    for (Token t : prompt) s.sampler->accept(t);
    {
      std::lock_guard jl(s.job->mutex_);
      s.job->state_.cached_tokens = static_cast<int>(reuse);
    }
    ++stats_.active_slots;
  }
  stats_.queue_depth = queue_.size();
}

void Engine::release(Slot& slot, FinishReason reason, const std::string& error) {
  // A cancelled or failed sequence gives its cells back now; a finished one keeps them as the
  // prefix the slot's next request may reuse (a slot never holds more than its share).
  if (reason == FinishReason::Cancelled || reason == FinishReason::Error) {
    session_->cache().seq_clear(slot.seq);
    slot.held.clear();
  }
  {
    // The counters first: a requester that sees its end also sees them.
    std::lock_guard lock(mutex_);
    --stats_.active_slots;
    stats_.kv_cells_used = session_->cache().used();
  }
  slot.job->finish(reason, error);
  slot.job.reset();
  slot.sampler.reset();
  slot.rules.reset();
  slot.harmony.reset();
  slot.next = kNoToken;
}

bool Engine::accept_token(Slot& slot, Token token) {
  GenerationRules::Step step;
  try {
    step = slot.rules->accept(token, *slot.sampler);
  } catch (const Error& e) {  // a grammar that cannot go on
    release(slot, FinishReason::Error, e.what());
    return true;
  }
  if (step.joined) {
    std::lock_guard jl(slot.job->mutex_);
    slot.job->state_.completion_tokens = static_cast<int>(slot.rules->generated());
  }
  if (slot.harmony)
    slot.harmony->push(token);  // the final channel's text goes to the job as it comes
  else
    slot.job->push(step.text);
  // A slot holds at most its share of the context: full, it ends as if at its limit.
  if (!step.end && static_cast<int64_t>(slot.held.size()) >= slot_ctx_) step.end = GenerateEnd::Length;
  if (!step.end) {
    slot.next = token;
    return false;
  }
  if (slot.harmony) {
    slot.harmony->finish();
    const HarmonyReader& reply = slot.harmony->reader();
    slot.job->set_structure(reply.channel_text("analysis"), reply.tool_calls());
  } else {
    slot.job->push(slot.rules->finish());  // nothing after a stop string
  }
  release(slot, *step.end == GenerateEnd::Length ? FinishReason::Length : FinishReason::Stop);
  return true;
}

void Engine::step() {
  for (Slot& s : slots_)
    if (s.job && s.job->cancelled()) release(s, FinishReason::Cancelled);

  Batch batch;
  std::vector<Slot*> rows;  // the slot of each output row
  std::vector<size_t> prompt_taken(slots_.size(), 0);
  for (Slot& s : slots_) {
    if (!s.job || s.next == kNoToken) continue;
    batch.add(s.next, static_cast<Pos>(s.held.size()), s.seq, true);
    rows.push_back(&s);
  }
  int64_t budget = options_.prompt_chunk;
  for (size_t i = 0; i < slots_.size() && budget > 0; ++i) {
    Slot& s = slots_[i];
    if (!s.job || s.next != kNoToken) continue;
    const std::vector<Token>& prompt = s.job->prompt_;
    const size_t n = std::min(static_cast<size_t>(budget), prompt.size() - s.fed);
    for (size_t j = 0; j < n; ++j) {
      const size_t at = s.fed + j;
      batch.add(prompt[at], static_cast<Pos>(at), s.seq, at + 1 == prompt.size());
    }
    if (s.fed + n == prompt.size()) rows.push_back(&s);
    prompt_taken[i] = n;
    budget -= static_cast<int64_t>(n);
  }
  if (batch.size() == 0) return;

  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float>* logits = nullptr;
  try {
    logits = &session_->decode(batch);
  } catch (const Error& e) {
    for (Slot& s : slots_)
      if (s.job) release(s, FinishReason::Error, e.what());
    return;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The cache now holds the batch: record it per slot (in batch order: generating slots first).
  size_t n_prompt = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!s.job) continue;
    if (s.next != kNoToken) {
      s.held.push_back(s.next);
      s.next = kNoToken;
    } else if (prompt_taken[i] > 0) {
      const auto& prompt = s.job->prompt_;
      s.held.insert(s.held.end(), prompt.begin() + static_cast<std::ptrdiff_t>(s.fed),
                    prompt.begin() + static_cast<std::ptrdiff_t>(s.fed + prompt_taken[i]));
      s.fed += prompt_taken[i];
      n_prompt += prompt_taken[i];
    }
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.steps;
    stats_.prompt_tokens += n_prompt;
    stats_.generated_tokens += rows.size();  // each output row samples one token
    stats_.decode_seconds += seconds;
    stats_.activation_bytes = session_->activation_bytes();
    stats_.kv_cells_used = session_->cache().used();
  }
  const size_t n_vocab = logits->size() / std::max<size_t>(rows.size(), 1);
  for (size_t r = 0; r < rows.size(); ++r) {
    Slot& s = *rows[r];
    const std::span<const float> row(logits->data() + r * n_vocab, n_vocab);
    Token token;
    try {
      token = s.sampler->sample(row);  // a grammar may find no token allowed, or exceed its limits
    } catch (const Error& e) {
      release(s, FinishReason::Error, e.what());
      continue;
    }
    accept_token(s, token);
  }
}

}  // namespace tessera::llm
