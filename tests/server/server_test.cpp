// The HTTP server in-process on 127.0.0.1 (a free port) with stories260K: completions streamed
// and not, the same text under load, stop strings, errors in OpenAI's shape, the API key, the
// bounded queue, cancellation on disconnect, tokenize, metrics and the log line.
#include "tessera/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using nlohmann::json;

#include "test_server.h"

using namespace tessera::test_server;

TEST(Server, CompletionsGreedyWithUsageAndALogLine) {
  TestServer s;
  auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto r = s.post("/v1/completions", greedy("Once upon a time", 40));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "stories260K.gguf");
  const std::string text = j["choices"][0]["text"];
  EXPECT_EQ(text.rfind(kLily, 0), 0u) << text;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 40);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);  // BOS + 4 tokens, as the tokenizer test has them
  EXPECT_EQ(j["usage"]["total_tokens"], 45);
  // A log line follows its response (the logger runs once the response is written), so the
  // health request's line may come after the completion's: each is looked for, in any order.
  auto lines = s.log();
  for (int i = 0; i < 400 && lines.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    lines = s.log();
  }
  ASSERT_EQ(lines.size(), 2u);
  const auto line_starting = [&](const std::string& prefix) -> std::string {
    for (const auto& line : lines) {
      if (line.rfind(prefix, 0) == 0) return line;
    }
    return {};
  };
  EXPECT_FALSE(line_starting("GET /health 200 tokens=0 ").empty()) << lines[0] << "\n" << lines[1];
  const std::string completion = line_starting("POST /v1/completions 200 tokens=45 ");
  EXPECT_FALSE(completion.empty()) << lines[0] << "\n" << lines[1];
  EXPECT_NE(completion.find(" ms"), std::string::npos) << completion;
}

TEST(Server, StreamedCompletionIsTheSameText) {
  TestServer s;
  auto plain = s.post("/v1/completions", greedy("Once upon a time", 30));
  ASSERT_TRUE(plain);
  const std::string expected = json::parse(plain->body)["choices"][0]["text"];
  json body = greedy("Once upon a time", 30);
  body["stream"] = true;
  auto r = s.post("/v1/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto [text, finish] = streamed_text(r->body);
  EXPECT_EQ(text, expected);
  EXPECT_EQ(finish, "length");
  // The text comes as it is generated, one event per token here (the story is ASCII and there is
  // no stop string to hold a piece back), however fast the tokens come.
  const auto events = sse_events(r->body);
  size_t with_text = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    with_text += !json::parse(events[i])["choices"][0]["text"].get<std::string>().empty();
  EXPECT_EQ(with_text, 30u) << r->body;
}

TEST(Server, EightConcurrentClientsGetTheirAloneText) {
  const std::vector<std::string> prompts = {"Once upon a time",     "The little dog",
                                            "Lily and Tom went",    "One day, a big bear",
                                            "The sun was",          "There was a girl named Sue",
                                            "A bird sat on a tree", "Mom said to Ben"};
  TestServer s([](server::ServerOptions& o) {
    o.n_slots = 8;
    o.prompt_chunk = 6;
  });
  std::vector<std::string> alone;
  for (const auto& p : prompts) {
    auto r = s.post("/v1/completions", greedy(p, 40));
    ASSERT_TRUE(r);
    alone.push_back(json::parse(r->body)["choices"][0]["text"]);
  }
  std::vector<std::string> got(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      json body = greedy(prompts[i], 40);
      body["stream"] = i % 2 == 1;  // half streamed
      auto r = s.post("/v1/completions", body);
      if (!r || r->status != 200) return;
      got[i] = i % 2 == 1 ? streamed_text(r->body).first
                          : json::parse(r->body)["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], alone[i]) << prompts[i];
}

TEST(Server, StopStringsAreNotEmitted) {
  TestServer s;
  json body = greedy("Once upon a time", 40);
  body["stop"] = json::array({"tle gi", "xyz"});
  auto r = s.post("/v1/completions", body);
  ASSERT_TRUE(r);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], ", there was a lit");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  body["stream"] = true;
  body["stop"] = "Lily";
  auto rs = s.post("/v1/completions", body);
  ASSERT_TRUE(rs);
  const auto [text, finish] = streamed_text(rs->body);
  EXPECT_EQ(text, ", there was a little girl named ");
  EXPECT_EQ(finish, "stop");
}

TEST(Server, BadRequestsAreOpenAIErrorsAndTheServerKeepsServing) {
  TestServer s([](server::ServerOptions& o) { o.max_body_bytes = 4096; });
  auto raw = [&](const std::string& body) {
    return s.client().Post("/v1/completions", body, "application/json");
  };
  expect_error(raw("{\"prompt\": "), 400, "invalid_json");
  expect_error(raw("[1, 2]"), 400, "invalid_json");
  expect_error(s.post("/v1/completions", {{"max_tokens", 5}}), 400, "missing_prompt");
  expect_error(s.post("/v1/completions", {{"prompt", ""}}), 400, "empty_prompt");
  expect_error(s.post("/v1/completions", {{"prompt", 5}}), 400, "invalid_type");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", "5"}}), 400, "invalid_type");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 0}}), 400, "invalid_value");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", -3}}), 400, "invalid_value");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 257}}), 400,
               "context_length_exceeded");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"temperature", "hot"}}), 400, "invalid_type");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"stream", 1}}), 400, "invalid_type");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"stop", json::array({1})}}), 400,
               "invalid_type");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"top_p", 2.0}}), 422, "invalid_value");
  expect_error(s.post("/v1/completions", {{"prompt", "Hi"}, {"n", 2}}), 422, "invalid_value");
  expect_error(s.post("/v1/chat/completions",
                      {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"n", 3}}),
               422, "invalid_value");
  expect_error(s.post("/v1/completions", {{"prompt", json::array({1, 99999})}}), 400, "invalid_value");
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += " cat";
  expect_error(s.post("/v1/completions", {{"prompt", long_prompt}}), 400, "context_length_exceeded");
  expect_error(raw("{\"prompt\": \"" + std::string(5000, 'a') + "\"}"), 413, "payload_too_large");
  expect_error(s.client().Get("/v1/nothing"), 404, "not_found");
  expect_error(s.post("/v1/chat/completions", {{"max_tokens", 5}}), 400, "missing_messages");
  expect_error(s.post("/v1/chat/completions", {{"messages", "hi"}}), 400, "invalid_type");
  json one_choice = greedy("Once upon a time", 5);
  one_choice["n"] = 1;
  auto ok = s.post("/v1/completions", one_choice);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Server, ApiKeyIsRequiredExceptForHealth) {
  TestServer s([](server::ServerOptions& o) { o.api_key = "sekret"; });
  expect_error(s.post("/v1/completions", greedy("Hi", 2)), 401, "invalid_api_key");
  expect_error(s.post("/v1/completions", greedy("Hi", 2), {{"Authorization", "Bearer sekreT"}}), 401,
               "invalid_api_key");
  expect_error(s.post("/v1/completions", greedy("Hi", 2), {{"Authorization", "Bearer sekret2"}}), 401,
               "invalid_api_key");
  expect_error(s.post("/v1/completions", greedy("Hi", 2), {{"Authorization", "sekret"}}), 401,
               "invalid_api_key");
  auto ok = s.post("/v1/completions", greedy("Hi", 2), {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(Server, FullQueueIs503AtOnceAndADisconnectCancels) {
  TestServer s([](server::ServerOptions& o) {
    o.n_slots = 1;
    o.max_queue = 0;
    o.n_ctx = 2048;
  });
  // A long streamed generation that the client abandons after a few chunks, but only once the second
  // request has been turned away: until then it holds the slot (2000 tokens take far longer than one
  // rejected request, and the client stalls instead of hanging up).
  constexpr int kLong = 2000;
  std::atomic<int> chunks{0};
  std::atomic<bool> rejected{false};
  std::thread streamer([&] {
    json body = greedy("Once upon a time", kLong);
    body["stream"] = true;
    body["ignore_eos"] = true;
    httplib::Client c = s.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      if (++chunks < 4) return true;
      for (int i = 0; i < 4000 && !rejected; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return false;
    };
    c.send(req);
  });
  // While it holds the only slot, another request finds no room in the (empty) queue.
  for (int i = 0; i < 2000 && chunks == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GT(chunks, 0) << "the stream never started";
  expect_error(s.post("/v1/completions", greedy("The sun was", 3)), 503, "queue_full");
  rejected = true;
  streamer.join();
  // The abandoned generation ends soon and frees its cells.
  bool freed = false;
  for (int i = 0; i < 100 && !freed; ++i) {
    auto m = s.client().Get("/metrics");
    ASSERT_TRUE(m);
    freed = m->body.find("tessera_active_slots 0\n") != std::string::npos &&
            m->body.find("tessera_kv_cells_used 0\n") != std::string::npos;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(freed) << s.client().Get("/metrics")->body;
  // It was cancelled, not run to its 250 tokens.
  auto stats = s.client().Get("/metrics");
  ASSERT_TRUE(stats);
  const size_t at = stats->body.find("\ntessera_generated_tokens_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoi(stats->body.substr(at + 32)), kLong) << stats->body;
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tessera_requests_total{status=\"503\"}"), std::string::npos) << m->body;
  // The slot serves again.
  auto ok = s.post("/v1/completions", greedy("Once upon a time", 5));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Server, AClientThatGivesUpOnAPlainRequestCancelsIt) {
  // 16000 tokens take seconds (2000 could finish within the client's patience on a fast core).
  constexpr int kLong = 16000;
  TestServer s([](server::ServerOptions& o) { o.n_ctx = 16384; });
  json body = greedy("Once upon a time", kLong);
  body["ignore_eos"] = true;
  httplib::Client impatient = s.client();
  impatient.set_read_timeout(0, 300'000);  // 0.3 s: far less than kLong tokens take
  auto r = impatient.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_FALSE(r);  // timed out, connection closed
  impatient.stop();
  bool freed = false;
  std::string metrics;
  for (int i = 0; i < 100 && !freed; ++i) {
    auto m = s.client().Get("/metrics");
    ASSERT_TRUE(m);
    metrics = m->body;
    freed = metrics.find("tessera_active_slots 0\n") != std::string::npos &&
            metrics.find("tessera_kv_cells_used 0\n") != std::string::npos;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(freed) << metrics;
  const size_t at = metrics.find("\ntessera_generated_tokens_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoi(metrics.substr(at + 32)), kLong) << metrics;
}

TEST(Server, TimeoutBoundsTheWholeRequestAndCancelsIt) {
  // One slot and 16000 tokens to generate, far more than a second allows: one request generates,
  // the other waits for the slot, and both end at the one-second timeout.
  TestServer s([](server::ServerOptions& o) {
    o.n_ctx = 16384;
    o.timeout_s = 1;
  });
  constexpr int kLong = 16000;
  json body = greedy("Once upon a time", kLong);
  body["ignore_eos"] = true;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<httplib::Result> plain;
  std::thread generating([&] { plain.emplace(s.post("/v1/completions", body)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the plain request takes the slot
  json streamed_body = body;
  streamed_body["stream"] = true;
  auto streamed = s.post("/v1/completions", streamed_body);  // queued behind it
  generating.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 10.0);
  ASSERT_TRUE(plain);
  expect_error(*plain, 408, "request_timeout");
  // The stream had begun (200): it ends cleanly with an error event in OpenAI's shape, then [DONE].
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  const auto events = sse_events(streamed->body);
  ASSERT_GE(events.size(), 2u) << streamed->body;
  EXPECT_EQ(events.back(), "[DONE]");
  const json error = json::parse(events[events.size() - 2]);
  EXPECT_EQ(error["error"]["code"], "request_timeout") << streamed->body;
  // Both were cancelled, not run on: the slot is free, its cells too, and it serves at once.
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tessera_active_slots 0\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("tessera_kv_cells_used 0\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("tessera_queue_depth 0\n"), std::string::npos) << m->body;
  const size_t at = m->body.find("\ntessera_generated_tokens_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoi(m->body.substr(at + 32)), kLong) << m->body;
  auto ok = s.post("/v1/completions", greedy("Once upon a time", 5));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(Server, PromptChunkSetsThePromptTokensReadPerStep) {
  TestServer s([](server::ServerOptions& o) { o.prompt_chunk = 8; });
  json ids = json::array({1});
  for (int i = 0; i < 39; ++i) ids.push_back(300 + i);
  auto r = s.post("/v1/completions", {{"prompt", ids}, {"max_tokens", 1}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  // 40 prompt tokens, 8 a step: 5 steps, the last of which samples the one token.
  EXPECT_NE(m->body.find("\ntessera_decode_steps_total 5\n"), std::string::npos) << m->body;
}

TEST(Server, TokenizeDetokenizeModelsAndMetrics) {
  TestServer s;
  auto model = llm::Model::load(kModel);
  const auto vocab = llm::Vocab::from_gguf(*model->file());
  auto r = s.post("/tokenize", {{"content", "Once upon a time"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::vector<llm::Token> expected = vocab.encode("Once upon a time", false);
  EXPECT_EQ(json::parse(r->body)["tokens"].get<std::vector<llm::Token>>(), expected);
  auto d = s.post("/detokenize", {{"tokens", expected}});
  ASSERT_TRUE(d);
  EXPECT_EQ(json::parse(d->body)["content"], " Once upon a time");  // pieces keep the SentencePiece space
  expect_error(s.post("/detokenize", {{"tokens", json::array({-1})}}), 400, "invalid_value");
  auto models = s.client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "stories260K.gguf");
  s.post("/v1/completions", greedy("Once upon a time", 7));
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tessera_generated_tokens_total 7\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("tessera_prompt_tokens_total 5\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("tessera_requests_total{status=\"200\"} "), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("# TYPE tessera_queue_depth gauge\ntessera_queue_depth 0\n"), std::string::npos);
  // The slot keeps the 5 prompt tokens and the 6 decoded ones for the next request's prefix.
  EXPECT_NE(m->body.find("tessera_kv_cells_used 11\n"), std::string::npos) << m->body;
}

TEST(Server, AModelThatFailsToLoadIsAnErrorAndHealth503) {
  server::ServerOptions o;
  o.model_path = "/nonexistent/model.gguf";
  o.port = 0;
  o.log = [](const std::string&) {};
  server::Server srv(o);
  srv.start();
  EXPECT_THROW(srv.wait_loaded(), Error);
  httplib::Client c("127.0.0.1", srv.port());
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  expect_error(c.Post("/v1/completions", greedy("Hi", 2).dump(), "application/json"), 503, "loading");
  srv.stop();
}

TEST(Server, ChatThroughTheTemplateFileStreamedAndNot) {
  const std::string tmpl = std::string(TESSERA_SOURCE_DIR) + "/tests/server/stories.jinja";
  TestServer s([&](server::ServerOptions& o) { o.chat_template_file = tmpl; });
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "Once upon a time"}}})},
                     {"max_tokens", 30},
                     {"temperature", 0}};
  auto r = s.post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const std::string text = j["choices"][0]["message"]["content"];
  // The template renders "<s>Once upon a time": the same tokens as the completion's prompt.
  auto c = s.post("/v1/completions", greedy("Once upon a time", 30));
  ASSERT_TRUE(c);
  EXPECT_EQ(text, json::parse(c->body)["choices"][0]["text"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  json streamed = body;
  streamed["stream"] = true;
  auto rs = s.post("/v1/chat/completions", streamed);
  ASSERT_TRUE(rs);
  const auto [stext, finish] = streamed_text(rs->body, true);
  EXPECT_EQ(stext, text);
  EXPECT_EQ(finish, "length");
  EXPECT_NE(rs->body.find("\"role\":\"assistant\""), std::string::npos);  // the first delta
  // A template error is a 400, and the server keeps serving.
  expect_error(s.post("/v1/chat/completions", {{"messages", json::array({{{"content", "no role"}}})}}), 400,
               "");
  expect_error(s.post("/v1/chat/completions", {{"messages", json::array()}}), 400, "empty_messages");
}

TEST(Server, ChatWithoutATemplateIsA400) {
  TestServer s;  // stories260K has no tokenizer.chat_template
  expect_error(
      s.post("/v1/chat/completions", {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}}),
      400, "no_chat_template");
}

TEST(Server, ChatPageIsServed) {
  TestServer s;
  auto r = s.client().Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(r->body.find("/v1/chat/completions"), std::string::npos);
  EXPECT_EQ(r->body.find("http"), std::string::npos);  // no external assets
}
