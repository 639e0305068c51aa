#pragma once
// A job: work that calls the C API on a libuv worker thread (never on the event loop) and settles a
// Promise on the JS thread. A job may stream events (text pieces, load progress) to JS through a
// thread-safe function; its Promise then settles in that function's finalizer, which N-API runs
// after every queued event was delivered, so a caller's callback has seen every event before the
// Promise settles.
#include <napi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tessera.h"

namespace tnode {

// An error of the C API (its message, tessera_last_error(), and its status as a code such as
// "TESSERA_IO_ERROR") or of the binding ("ERR_TESSERA_...").
struct Failure {
  std::string message;
  std::string code;
};

// The code of a C API status: "TESSERA_" and the status name in capitals ("TESSERA_IO_ERROR").
std::string code_of(tessera_status status);
// Throws the calling thread's last C API error when status is not TESSERA_OK.
void check(tessera_status status);
[[noreturn]] void fail(std::string message, std::string code);
Napi::Error to_js(Napi::Env env, const Failure& failure);

// Text pieces of a completion, or the fraction of a load.
struct Event {
  std::string text;
  float fraction = 0.0f;
};

class Job : public std::enable_shared_from_this<Job> {
 public:
  explicit Job(Napi::Env env);
  virtual ~Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  Napi::Promise promise() const { return deferred_.Promise(); }
  // JS thread: runs run() on a libuv worker; `done` is called on the JS thread when run() has
  // returned (the C API objects are free again), before or after the Promise settles.
  void start(Napi::Env env, std::function<void()> done);
  // JS thread: settles the Promise of a job that never started.
  void reject_unstarted(Napi::Env env, const Failure& failure);

 protected:
  // Worker thread: the C API calls; throws Failure.
  virtual void run() = 0;
  // JS thread, after run() succeeded: the value the Promise resolves to.
  virtual Napi::Value result(Napi::Env env) { return env.Undefined(); }
  // Whether the job streams events (it then gets a thread-safe function at start).
  virtual bool streams() const { return false; }
  // JS thread: one event; may throw (a JS callback's exception), which fails the job.
  virtual void on_event(Napi::Env env, const Event& event) {}
  // JS thread: a JS callback threw; the job should stop as soon as it can.
  virtual void on_callback_error() {}
  // Worker thread: hands an event to on_event on the JS thread (no-op without a stream).
  void emit(Event event);

 private:
  struct Runner;
  static void deliver(Napi::Env env, Napi::Function, Job* job, Event* event);
  using Stream = Napi::TypedThreadSafeFunction<Job, Event, &Job::deliver>;
  static void finalize(Napi::Env env, void*, Job* job);
  void execute() noexcept;       // worker thread
  void finished(Napi::Env env);  // JS thread, after execute()
  void settle(Napi::Env env);

  Napi::Promise::Deferred deferred_;
  std::optional<Failure> failure_;
  Napi::Reference<Napi::Value> callback_error_;  // what a JS callback threw
  Stream stream_;
  bool has_stream_ = false;
  std::shared_ptr<Job> self_;  // keeps the job alive while its stream is
};

}  // namespace tnode
