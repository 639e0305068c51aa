// `tessera serve`: the OpenAI-compatible server (tessera/server.h) until SIGINT or SIGTERM.
#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "checks.h"
#include "commands.h"
#include "pipeline_flag.h"
#include "split_flags.h"
#include "tessera/llm/engine.h"
#include "tessera/mpi/pipeline.h"
#include "tessera/server.h"

namespace tessera::cli {
namespace {

void serve(const server::ServerOptions& options, int drain_timeout_s) {
  // The signals wait for sigwait below: every thread the server starts inherits the mask.
  // SIGUSR1 is the drain's own: its thread raises it when the last request has ended.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  server::Server srv(options);
  srv.start();
  fmt::print(stderr, "tessera serve: listening on http://{}:{} (loading {})\n", options.host, srv.port(),
             options.model_path);
  srv.wait_loaded();
  fmt::print(stderr, "tessera serve: model loaded, {} slot(s)\n", options.n_slots);
  int sig = 0;
  sigwait(&signals, &sig);
  std::thread drainer;
  if (sig == SIGTERM) {
    // A load balancer's stop: finish what was admitted (new requests get 503), then exit. A second
    // SIGTERM or a SIGINT stops at once.
    fmt::print(stderr, "tessera serve: draining (SIGTERM; at most {} s)\n", drain_timeout_s);
    drainer = std::thread([&srv, drain_timeout_s] {
      const bool drained = srv.drain(std::chrono::seconds(drain_timeout_s));
      fmt::print(stderr, "tessera serve: {}\n",
                 drained ? "drained" : "the drain timed out: stopping the requests still running");
      kill(getpid(), SIGUSR1);
    });
    sigwait(&signals, &sig);
  }
  fmt::print(stderr, "tessera serve: stopping ({})\n",
             sig == SIGINT    ? "SIGINT"
             : sig == SIGTERM ? "SIGTERM"
                              : "drained");
  srv.stop();
  if (drainer.joinable()) drainer.join();
}

// `serve --pipeline`: rank 0 serves HTTP with the first stage of the layers; every other rank loads
// its stage, decodes the engine's steps in a session made as the engine makes its own, and stops
// when rank 0 does (a drain on SIGTERM to rank 0 included: they ignore the signals mpirun forwards).
// An Error on any rank, rank 0's load or bind included, ends the whole job.
void serve_pipelined(server::ServerOptions options, int drain_timeout_s) {
  PipelineFlag::refuse_devices(options.n_gpu_layers, options.device);
  if (options.embeddings_only)
    throw Error(ErrorCode::Unsupported,
                "--embeddings is not served by a pipeline (--pipeline): embeddings need every layer in one "
                "process");
  auto pipeline = mpi::Pipeline::join();
  try {
    const llm::LayerRange layers =
        PipelineFlag::stage(*pipeline, options.model_path, options.tensor_split, true);
    options.tensor_split.clear();  // the ranks' shares, not devices'
    if (pipeline->rank() != 0) {
      sigset_t signals;
      sigemptyset(&signals);
      sigaddset(&signals, SIGINT);
      sigaddset(&signals, SIGTERM);
      pthread_sigmask(SIG_BLOCK, &signals, nullptr);
      llm::LoadOptions lo;
      lo.stage = layers;
      const auto model = llm::Model::load(options.model_path, lo);
      const auto session = llm::Engine::make_session(*model, server::engine_options(options));
      pipeline->wait_for_stages();
      pipeline->serve(*session);
      return;
    }
    options.pipeline = server::PipelineStage{layers, pipeline->size() > 1 ? &pipeline->link() : nullptr,
                                             [&p = *pipeline] { p.wait_for_stages(); }};
    serve(options, drain_timeout_s);
  } catch (const Error& e) {
    if (pipeline->size() == 1) throw;
    PipelineFlag::end_job(*pipeline, e);
  }
}

}  // namespace

void add_serve(CLI::App& app) {
  auto o = std::make_shared<server::ServerOptions>();
  auto* cmd = app.add_subcommand("serve", "Serve a GGUF model over an OpenAI-compatible HTTP API");
  cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required();
  cmd->add_option("--host", o->host, "address to bind (default: loopback only)");
  cmd->add_option("--port", o->port, "port (0: any free port)")->check(in_range(0, 65535));
  cmd->add_option("-n,--np,--parallel", o->n_slots, "slots: sequences generated together")->check(positive());
  cmd->add_option("-c,--ctx-size", o->n_ctx,
                  "KV cache cells shared by the slots (0: 4096 per slot, at most the model's)")
      ->check(non_negative());
  cmd->add_option("-t,--threads", o->n_threads, "CPU threads (0: all cores)")->check(non_negative());
  cmd->add_option("--n-gpu-layers", o->n_gpu_layers, "layers to offload to the device")
      ->check(non_negative());
  cmd->add_option("--device", o->device,
                  "device for offloaded layers (e.g. OpenCL0), or several: OpenCL0,OpenCL1");
  auto split = std::make_shared<SplitFlags>();
  split->add_to(cmd);
  cmd->add_option("--api-key", o->api_key, "require Authorization: Bearer KEY");
  cmd->add_option("--chat-template-file", o->chat_template_file,
                  "Jinja chat template (default: the model's)");
  cmd->add_option("--max-queue", o->max_queue, "requests that may wait for a slot (beyond: 503)");
  cmd->add_option("--timeout", o->timeout_s,
                  "seconds a request may run, waiting for a slot included (past it: cancelled, 408)")
      ->check(positive());
  cmd->add_option("--read-timeout", o->read_timeout_s,
                  "seconds a request's head and body may take to arrive (past it: 408, closed); also "
                  "how long an idle keep-alive connection or a stalled reader is kept")
      ->check(positive());
  cmd->add_option("--max-connections", o->max_connections, "connections open at once (beyond: 503)")
      ->check(positive());
  cmd->add_option("--allowed-hosts", o->allowed_hosts,
                  "Host names requests may name besides the listening address (DNS rebinding guard); "
                  "'*': any")
      ->delimiter(',');
  cmd->add_option("--cors-origin", o->cors_origins,
                  "origins whose web pages may call the API (CORS), e.g. http://localhost:3000; '*': any "
                  "(default: none but the server's own page)")
      ->delimiter(',');
  cmd->add_option("--batch-chunk", o->prompt_chunk,
                  "prompt tokens read per step, all slots together (smaller: steadier generation "
                  "while long prompts are read; larger: faster prompts)")
      ->check(positive());
  cmd->add_option("--max-body", o->max_body_bytes,
                  "largest request body in bytes, chunked too (beyond: 413)");
  cmd->add_flag("--embeddings,--embedding", o->embeddings_only,
                "serve /v1/embeddings only: no generation engine (embedding models are always so; "
                "/v1/embeddings answers without it too)");
  cmd->add_option("--pooling", o->pooling,
                  "/v1/embeddings' default pooling: mean, cls, last, none (default: the file's, else mean)")
      ->check(CLI::IsMember({"mean", "cls", "last", "none"}));
  auto drain_timeout_s = std::make_shared<int>(30);
  cmd->add_option("--drain-timeout", *drain_timeout_s,
                  "on SIGTERM, seconds the requests already admitted may take to finish (new ones get "
                  "503) before the server stops anyway")
      ->check(positive());
  auto pipeline = std::make_shared<PipelineFlag>();
  pipeline->add_to(cmd);
  cmd->callback([o, drain_timeout_s, split, pipeline] {
    o->split_layers = split->mode == "layer";
    o->tensor_split = split->tensor_split;
    if (pipeline->on)
      serve_pipelined(*o, *drain_timeout_s);
    else
      serve(*o, *drain_timeout_s);
  });
}

}  // namespace tessera::cli
