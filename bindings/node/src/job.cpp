#include "job.h"

#include <cctype>
#include <exception>

namespace tnode {

std::string code_of(tessera_status status) {
  std::string code = "TESSERA_";
  for (const char* p = tessera_status_name(status); *p != '\0'; ++p)
    if (*p == ' ')
      code += '_';
    else if (std::isalnum(static_cast<unsigned char>(*p)))
      code += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
  return code;
}

void check(tessera_status status) {
  if (status != TESSERA_OK) throw Failure{tessera_last_error(), code_of(status)};
}

void fail(std::string message, std::string code) { throw Failure{std::move(message), std::move(code)}; }

Napi::Error to_js(Napi::Env env, const Failure& failure) {
  Napi::Error error = Napi::Error::New(env, failure.message);
  error.Set("code", Napi::String::New(env, failure.code));
  return error;
}

// The AsyncWorker that runs a job on libuv's pool; it holds the job until its OnOK.
struct Job::Runner : Napi::AsyncWorker {
  Runner(Napi::Env env, std::shared_ptr<Job> job, std::function<void()> done)
      : Napi::AsyncWorker(env, "tessera"), job(std::move(job)), done(std::move(done)) {}
  void Execute() override { job->execute(); }
  void OnOK() override {
    job->finished(Env());
    if (done) done();
  }
  std::shared_ptr<Job> job;
  std::function<void()> done;
};

Job::Job(Napi::Env env) : deferred_(Napi::Promise::Deferred::New(env)) {}

void Job::start(Napi::Env env, std::function<void()> done) {
  if (streams()) {
    // One thread (the worker) holds the stream; its release after run() lets N-API finalize it
    // once the queue is empty, and the finalizer settles the Promise.
    stream_ = Stream::New(env, "tessera-stream", 0, 1, this, &Job::finalize, static_cast<void*>(nullptr));
    has_stream_ = true;
    self_ = shared_from_this();
  }
  (new Runner(env, shared_from_this(), std::move(done)))->Queue();
}

void Job::reject_unstarted(Napi::Env env, const Failure& failure) {
  failure_ = failure;
  settle(env);
}

void Job::emit(Event event) {
  if (!has_stream_) return;
  auto* e = new Event(std::move(event));
  if (stream_.NonBlockingCall(e) != napi_ok) delete e;
}

void Job::deliver(Napi::Env env, Napi::Function, Job* job, Event* event) {
  std::unique_ptr<Event> owned(event);
  if (env == nullptr || job == nullptr) return;  // the environment is going away
  if (!job->callback_error_.IsEmpty()) return;   // a callback threw: no more calls
  try {
    job->on_event(env, *owned);
  } catch (const Napi::Error& e) {
    job->callback_error_ = Napi::Reference<Napi::Value>::New(e.Value(), 1);
    job->on_callback_error();
  }
}

void Job::finalize(Napi::Env env, void*, Job* job) {
  std::shared_ptr<Job> keep = std::move(job->self_);
  job->has_stream_ = false;
  job->settle(env);
}

void Job::execute() noexcept {
  try {
    run();
  } catch (const Failure& f) {
    failure_ = f;
  } catch (const std::bad_alloc&) {
    failure_ = Failure{"out of memory", "ERR_TESSERA_OUT_OF_MEMORY"};
  } catch (const std::exception& e) {
    failure_ = Failure{e.what(), "ERR_TESSERA_INTERNAL"};
  } catch (...) {
    failure_ = Failure{"an unknown exception in the Node binding", "ERR_TESSERA_INTERNAL"};
  }
}

void Job::finished(Napi::Env env) {
  if (has_stream_)
    stream_.Release();  // finalize() settles, after the queued events
  else
    settle(env);
}

void Job::settle(Napi::Env env) {
  Napi::HandleScope scope(env);
  try {
    if (!callback_error_.IsEmpty())
      deferred_.Reject(callback_error_.Value());
    else if (failure_)
      deferred_.Reject(to_js(env, *failure_).Value());
    else
      deferred_.Resolve(result(env));
  } catch (const Napi::Error& e) {
    deferred_.Reject(e.Value());
  }
  callback_error_.Reset();
}

}  // namespace tnode
