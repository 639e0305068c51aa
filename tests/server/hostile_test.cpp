// The server against hostile clients (issue: `tessera serve` under attack), each test the
// reproduction that broke the cpp-httplib server: deep JSON, slow heads, compressed and chunked
// bodies past the limit, memory per connection, chat content forging control tokens, the prefix
// cache read by another client, browsers driving a local server, log injection, bursts,
// pipelining, half-closed clients, parameters that were silently ignored, integer wrap-around.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "support/sanitizers.h"
#include "tessera/llm/model.h"
#include "tessera/llm/vocab.h"
#include "test_server.h"

using namespace tessera;
using namespace tessera::test_server;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kTemplate = std::string(TESSERA_SOURCE_DIR) + "/tests/server/stories.jinja";

json chat_body(const std::string& content, int max_tokens = 1) {
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// One request on a fresh raw connection; the response or a failed test.
RawClient::Response round_trip(int port, const std::string& request, const char* source = nullptr) {
  RawClient c(port, source);
  EXPECT_TRUE(c.send(request));
  auto r = c.read_response();
  EXPECT_TRUE(r.has_value()) << request.substr(0, 200);
  return r.value_or(RawClient::Response{});
}

void expect_raw_error(const RawClient::Response& r, int status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["error"]["code"], code) << r.body;
}

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

}  // namespace

TEST(ServerHostile, DeeplyNestedJsonIsA400AndTheServerLives) {
  TestServer s([](server::ServerOptions& o) { o.chat_template_file = kTemplate; });
  const int port = s.srv->port();
  const std::string deep = nested(60000);
  for (const std::string& body :
       {"{\"messages\":" + deep + "}", "{\"messages\":[{\"role\":" + deep + ",\"content\":\"x\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[" + deep + "]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"unknown\":" + deep + "}"}) {
    expect_raw_error(round_trip(port, http_request("POST", "/v1/chat/completions", body)), 400,
                     "invalid_json");
  }
  expect_raw_error(round_trip(port, http_request("POST", "/v1/completions", "{\"prompt\":" + deep + "}")),
                   400, "invalid_json");
  // The same through a chunked upload.
  RawClient c(port);
  const std::string body = "{\"messages\":" + deep + "}";
  std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 4096) {
    const std::string part = body.substr(at, 4096);
    char size[16];
    std::snprintf(size, sizeof size, "%zx", part.size());
    req += std::string(size) + "\r\n" + part + "\r\n";
  }
  ASSERT_TRUE(c.send(req + "0\r\n\r\n"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  expect_raw_error(*r, 400, "invalid_json");
  // Nesting within the bound is still fine JSON (and the template's to judge).
  auto ok = s.post("/v1/chat/completions", chat_body("Once upon a time"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(ServerHostile, SlowHeadsDoNotStallOthersAndAreClosed) {
  TestServer s([](server::ServerOptions& o) {
    o.read_timeout_s = 2;
    o.n_slots = 4;
    o.max_queue = 64;
  });
  const int port = s.srv->port();
  // 80 connections send a partial head, then one byte every 0.5 s (more than np + max-queue + 4).
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 80; ++i) {
    slow.push_back(std::make_unique<RawClient>(port));
    ASSERT_TRUE(slow.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n"));
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (auto& c : slow) c->send("X");
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  // Others are answered at once meanwhile.
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    auto h = s.client().Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
    auto c = s.post("/v1/completions", greedy("Once upon a time", 4));
    ASSERT_TRUE(c);
    EXPECT_EQ(c->status, 200);
  }
  // Each slow head is cut off at the read timeout, however it trickles.
  int closed = 0;
  for (auto& c : slow) closed += c->closed_within(4.0);
  stop = true;
  trickle.join();
  EXPECT_EQ(closed, 80);
  bool logged = false;
  for (const std::string& line : s.log()) logged |= line.rfind("- - 408 ", 0) == 0;
  EXPECT_TRUE(logged);
}

TEST(ServerHostile, CompressedBodiesAreRefusedAndChunkedOnesObeyMaxBody) {
  TestServer s([](server::ServerOptions& o) { o.max_body_bytes = 4096; });
  const int port = s.srv->port();
  expect_raw_error(
      round_trip(port, http_request("POST", "/v1/completions", std::string(100, '\x1f'),
                                    {"Content-Type: application/json", "Content-Encoding: gzip"})),
      415, "unsupported_media_type");
  // 5 MB chunked against a 4 KiB limit: 413 (and the connection closes), not 200.
  RawClient c(port);
  std::thread upload([&] {
    std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    c.send(req);
    const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
    for (int i = 0; i < 80; ++i)
      if (!c.send(chunk)) break;
  });
  auto r = c.read_response();
  upload.join();
  ASSERT_TRUE(r);
  expect_raw_error(*r, 413, "payload_too_large");
  // A chunked body within the limit is read whole.
  const std::string body = greedy("Once upon a time", 3).dump();
  RawClient ok(port);
  ASSERT_TRUE(
      ok.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              "Transfer-Encoding: chunked\r\n\r\n5\r\n" +
              body.substr(0, 5) + "\r\n" + fmt::format("{:x}", body.size() - 5) + "\r\n" + body.substr(5) +
              "\r\n0\r\n\r\n"));
  auto good = ok.read_response();
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200) << good->body;
}

TEST(ServerHostile, MemoryStaysFlatAcrossConnectionsAndHugeHeadsAre431) {
  TestServer s([](server::ServerOptions& o) { o.max_body_bytes = 2u << 20; });
  const int port = s.srv->port();
  std::string text;
  while (text.size() < (1u << 20)) text += "Once upon a time, there was a little girl named Lily. ";
  const std::string req =
      http_request("POST", "/tokenize", json{{"content", text}, {"with_pieces", true}}.dump());
  auto tokenize_on_new_connections = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto r = round_trip(port, req);
      ASSERT_EQ(r.status, 200);
      ASSERT_GT(r.body.size(), 5u << 20);
      ASSERT_TRUE(json::parse(r.body)["tokens"][0].contains("piece"));
    }
  };
  // Each connection used to keep ~650 MB (a thread each). Now a fixed few workers do the work, so
  // once each has served such a request, more connections cost nothing that stays.
  tokenize_on_new_connections(8);
  const long warm = rss_kib();
  tokenize_on_new_connections(8);
  const long after = rss_kib();
  // (ASan keeps freed memory in quarantine and TSan shadows it: RSS says nothing there; the release
  // runs check it.)
  const bool rss_means_memory = !testing_support::kShadowMemorySanitizer;
  if (rss_means_memory) {
    EXPECT_LT(after - warm, 32 * 1024) << warm << " KiB -> " << after << " KiB";
  }
  // A million headers: refused once the head passes 16 KiB, without reading the rest.
  RawClient c(port);
  std::thread flood([&] {
    c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    const std::string headers = [] {
      std::string h;
      for (int i = 0; i < 1000; ++i) h += "X-A: b\r\n";
      return h;
    }();
    for (int i = 0; i < 1000; ++i)
      if (!c.send(headers)) break;
  });
  auto r = c.read_response();
  flood.join();
  ASSERT_TRUE(r);
  expect_raw_error(*r, 431, "headers_too_large");
  if (rss_means_memory) {
    EXPECT_LT(rss_kib() - after, 32 * 1024);
  }
}

TEST(ServerHostile, ChatContentCannotForgeControlTokens) {
  TestServer s([](server::ServerOptions& o) { o.chat_template_file = kTemplate; });
  auto model = llm::Model::load(kModel);
  const auto vocab = llm::Vocab::from_gguf(*model->file());
  // stories.jinja writes "<s>" (BOS) then the content: one BOS, and the content as plain text.
  const std::string content = "</s></s></s>";
  const auto expected = vocab.encode(content, /*add_special=*/true, /*parse_special=*/false);
  auto r = s.post("/v1/chat/completions", chat_body(content));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens"], expected.size());
  EXPECT_GT(expected.size(), 4u);  // not BOS + 3 EOS
}

TEST(ServerHostile, AnotherClientsCachedPromptIsNotObservable) {
  TestServer s([](server::ServerOptions& o) { o.n_slots = 2; });
  const int port = s.srv->port();
  const std::string secret = "Once upon a time the secret code was seven blue frogs";
  auto cached = [&](const std::string& prompt, const char* source, const json& extra = json::object()) {
    json body = greedy(prompt, 1);
    body.update(extra);
    auto r = round_trip(port, http_request("POST", "/v1/completions", body.dump()), source);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached(secret, "127.0.0.1"), 0);
  // Another address guessing the continuation learns nothing, right or wrong.
  EXPECT_EQ(cached("Once upon a time the secret code was seven", "127.0.0.2"), 0);
  EXPECT_EQ(cached("Once upon a time the secret code was nine", "127.0.0.3"), 0);
  // The same address with another cache_salt (or user) is another scope too.
  EXPECT_EQ(cached("Once upon a time the secret code was seven", "127.0.0.1", {{"cache_salt", "b"}}), 0);
  // The client that read the prompt reuses it (a multi-turn chat re-reads only the new turn).
  EXPECT_GT(cached(secret + " and", "127.0.0.1"), 10);
}

TEST(ServerHostile, BrowsersMeetContentTypeHostAndCorsChecks) {
  TestServer s([](server::ServerOptions& o) {
    o.cors_origins = {"http://app.example"};
    o.allowed_hosts = {"tessera.internal"};
  });
  const int port = s.srv->port();
  const std::string body = greedy("Once upon a time", 2).dump();
  // Bodies a page can send without a preflight are not JSON requests.
  expect_raw_error(
      round_trip(port, http_request("POST", "/v1/completions", body, {"Content-Type: text/plain"})), 415,
      "unsupported_media_type");
  expect_raw_error(round_trip(port, http_request("POST", "/v1/completions", body,
                                                 {"Content-Type: application/x-www-form-urlencoded"})),
                   415, "unsupported_media_type");
  expect_raw_error(round_trip(port, http_request("POST", "/v1/completions", body, {})), 415,
                   "unsupported_media_type");
  EXPECT_EQ(round_trip(port, http_request("POST", "/v1/completions", body,
                                          {"Content-Type: Application/JSON; charset=utf-8"}))
                .status,
            200);
  // DNS rebinding: a name that is not this server's is refused, on every route.
  auto with_host = [&](const std::string& host, const std::string& path = "/health") {
    return round_trip(port, "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
  };
  expect_raw_error(with_host("evil.example"), 403, "host_not_allowed");
  expect_raw_error(with_host("evil.example", "/v1/models"), 403, "host_not_allowed");
  expect_raw_error(round_trip(port, "GET /health HTTP/1.1\r\n\r\n"), 403, "host_not_allowed");
  EXPECT_EQ(with_host("localhost:" + std::to_string(port)).status, 200);
  EXPECT_EQ(with_host("127.0.0.1:" + std::to_string(port)).status, 200);
  EXPECT_EQ(with_host("[::1]:" + std::to_string(port)).status, 200);
  EXPECT_EQ(with_host("tessera.internal").status, 200);
  // CORS: the listed origin gets a preflight answer and its headers; any other origin a 403.
  auto preflight =
      round_trip(port, http_request("OPTIONS", "/v1/chat/completions", "",
                                    {"Origin: http://app.example", "Access-Control-Request-Method: POST",
                                     "Access-Control-Request-Headers: content-type, authorization"}));
  EXPECT_EQ(preflight.status, 204);
  EXPECT_EQ(preflight.headers["access-control-allow-origin"], "http://app.example");
  EXPECT_NE(preflight.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  EXPECT_NE(preflight.headers["access-control-allow-headers"].find("Authorization"), std::string::npos);
  expect_raw_error(
      round_trip(port, http_request("OPTIONS", "/v1/chat/completions", "",
                                    {"Origin: http://evil.example", "Access-Control-Request-Method: POST"})),
      403, "origin_not_allowed");
  auto cross =
      round_trip(port, http_request("POST", "/v1/completions", body,
                                    {"Content-Type: application/json", "Origin: http://app.example"}));
  EXPECT_EQ(cross.status, 200);
  EXPECT_EQ(cross.headers["access-control-allow-origin"], "http://app.example");
  expect_raw_error(
      round_trip(port, http_request("POST", "/v1/completions", body,
                                    {"Content-Type: application/json", "Origin: http://evil.example"})),
      403, "origin_not_allowed");
  // The server's own page (same origin) needs no CORS.
  auto same = round_trip(port, http_request("POST", "/v1/completions", body,
                                            {"Content-Type: application/json", "Origin: http://127.0.0.1"}));
  EXPECT_EQ(same.status, 200);
  EXPECT_EQ(same.headers.count("access-control-allow-origin"), 0u);
}

TEST(ServerHostile, LoggedRequestsAreEscapedAndBounded) {
  TestServer s;
  const int port = s.srv->port();
  round_trip(port, "GET /v1/x%0aFAKE%1b[31m HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  round_trip(port, std::string(5000, 'A') + " / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  round_trip(port, "GET /\x7f\xc3\xa9 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  std::vector<std::string> lines;
  for (int i = 0; i < 200 && lines.size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    lines = s.log();
  }
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& line : lines) {
    EXPECT_LT(line.size(), 400u) << line;
    for (unsigned char ch : line) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << line;
  }
}

TEST(ServerHostile, BurstsAreAnsweredPipelinedRequestsToAndHalfClosedClientsToo) {
  TestServer s([](server::ServerOptions& o) {
    o.n_slots = 1;
    o.max_queue = 2;
  });
  const int port = s.srv->port();
  // 64 requests at once: each gets an answer (200, or 503 when the queue is full), none a reset.
  std::vector<int> status(64, 0);
  {
    std::vector<std::thread> burst;
    for (int i = 0; i < 64; ++i)
      burst.emplace_back([&, i] {
        try {
          RawClient c(port);
          c.send(http_request("POST", "/v1/completions", greedy("Once upon a time", 8).dump()));
          if (auto r = c.read_response(60)) status[i] = r->status;
        } catch (const std::exception&) {
        }
      });
    for (auto& t : burst) t.join();
  }
  int ok = 0, busy = 0;
  for (int st : status) ok += st == 200, busy += st == 503;
  EXPECT_EQ(ok + busy, 64);
  EXPECT_GE(ok, 1);
  // Pipelined: three requests in one write, three answers in order.
  RawClient p(port);
  ASSERT_TRUE(p.send(http_request("GET", "/health") +
                     http_request("POST", "/tokenize", json{{"content", "Once"}}.dump()) +
                     http_request("GET", "/v1/models")));
  auto a = p.read_response(), b = p.read_response(), c = p.read_response();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(json::parse(a->body)["status"], "ok");
  EXPECT_TRUE(json::parse(b->body).contains("tokens"));
  EXPECT_EQ(json::parse(c->body)["object"], "list");
  // Half-closed: the whole request, then shutdown(SHUT_WR): the answer still comes.
  RawClient h(port);
  ASSERT_TRUE(h.send(http_request("POST", "/v1/completions", greedy("Once upon a time", 20).dump())));
  h.shutdown_write();
  auto r = h.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"].get<std::string>().rfind(", there was", 0), 0u)
      << r->body;
}

TEST(ServerHostile, ParametersAreHonouredOrRefusedByName) {
  TestServer s([](server::ServerOptions& o) { o.chat_template_file = kTemplate; });
  auto model = llm::Model::load(kModel);
  const auto vocab = llm::Vocab::from_gguf(*model->file());
  const json base = greedy("Once upon a time", 6);
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"logprobs", 2},
                                                 {"echo", true},
                                                 {"best_of", 3},
                                                 {"suffix", "end"},
                                                 {"tools", json::array({{{"type", "function"}}})},
                                                 {"tool_choice", "required"},
                                                 {"response_format", {{"type", "xml"}}},
                                                 {"stream_option", true}}) {
    json body = base;
    body[key] = value;
    auto r = s.post("/v1/completions", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << key << ": " << r->body;
    EXPECT_NE(r->body.find("'" + key + "'"), std::string::npos) << r->body;
  }
  // Their defaults are accepted.
  json defaults = base;
  defaults["echo"] = false;
  defaults["best_of"] = 1;
  defaults["logprobs"] = nullptr;
  auto d = s.post("/v1/completions", defaults);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200) << d->body;
  // Content parts are their text; other part types are refused.
  json parts = chat_body("");
  parts["messages"][0]["content"] =
      json::array({{{"type", "text"}, {"text", "Once upon "}}, {{"type", "text"}, {"text", "a time"}}});
  auto pr = s.post("/v1/chat/completions", parts);
  ASSERT_TRUE(pr);
  ASSERT_EQ(pr->status, 200) << pr->body;
  EXPECT_EQ(json::parse(pr->body)["usage"]["prompt_tokens"], 5);  // as "Once upon a time"
  parts["messages"][0]["content"] = json::array({{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}});
  expect_error(s.post("/v1/chat/completions", parts), 400, "unsupported_content");
  // logit_bias: +100 on one token makes greedy decoding repeat it.
  const llm::Token forced = vocab.encode(" frog", false).back();
  json biased = base;
  biased["logit_bias"] = {{std::to_string(forced), 100}};
  auto b = s.post("/v1/completions", biased);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->status, 200) << b->body;
  std::string six;
  for (int i = 0; i < 6; ++i) six += vocab.token_to_piece(forced);
  EXPECT_EQ(json::parse(b->body)["choices"][0]["text"], six);
  expect_error(s.post("/v1/completions",
                      [&] {
                        json j = base;
                        j["logit_bias"] = {{"99999", 1}};
                        return j;
                      }()),
               400, "invalid_value");
  // The penalties reach the sampler: the greedy story repeats tokens, and stops doing so.
  json plain = greedy("Once upon a time", 40), penalised = plain;
  penalised["frequency_penalty"] = 2.0;
  penalised["presence_penalty"] = 2.0;
  auto p0 = s.post("/v1/completions", plain), p1 = s.post("/v1/completions", penalised);
  ASSERT_TRUE(p0 && p1);
  ASSERT_EQ(p1->status, 200) << p1->body;
  EXPECT_NE(json::parse(p0->body)["choices"][0]["text"], json::parse(p1->body)["choices"][0]["text"]);
  expect_error(s.post("/v1/completions",
                      [&] {
                        json j = base;
                        j["presence_penalty"] = 3;
                        return j;
                      }()),
               422, "invalid_value");
}

TEST(ServerHostile, IntegersDoNotWrapAndHttpDetailsAreRight) {
  TestServer s([](server::ServerOptions& o) { o.api_key = "k3y"; });
  const int port = s.srv->port();
  const httplib::Headers auth{{"Authorization", "bearer k3y"}};  // the scheme in any case
  auto raw = [&](const std::string& body) {
    return s.client().Post("/v1/completions", auth, body, "application/json");
  };
  auto big = raw(R"({"prompt":"Hi","max_tokens":9223372036854775808})");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 422) << big->body;
  EXPECT_NE(big->body.find("9223372036854775808"), std::string::npos) << big->body;
  auto id = raw(R"({"prompt":[1,18446744073709551615]})");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->status, 400);
  EXPECT_NE(id->body.find("18446744073709551615"), std::string::npos) << id->body;
  auto k = raw(R"({"prompt":"Hi","top_k":9223372036854775808})");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->status, 422);
  EXPECT_EQ(k->body.find(">= 0"), std::string::npos) << k->body;
  auto ok = raw(greedy("Hi", 2).dump());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // Wrong methods are 405 with Allow; HEAD / is as public as GET /.
  auto wrong = round_trip(port, http_request("GET", "/v1/completions", "", {"Authorization: Bearer k3y"}));
  expect_raw_error(wrong, 405, "method_not_allowed");
  EXPECT_NE(wrong.headers["allow"].find("POST"), std::string::npos);
  RawClient head(port);
  ASSERT_TRUE(head.send("HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  const std::string head_answer = head.read_all(10);
  EXPECT_EQ(head_answer.rfind("HTTP/1.1 200", 0), 0u) << head_answer;
  EXPECT_EQ(head_answer.substr(head_answer.find("\r\n\r\n") + 4), "");
  RawClient unauthorized(port);
  ASSERT_TRUE(unauthorized.send("HEAD /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  const std::string refused = unauthorized.read_all(10);
  EXPECT_EQ(refused.rfind("HTTP/1.1 401", 0), 0u) << refused;
  EXPECT_EQ(refused.substr(refused.find("\r\n\r\n") + 4), "");
}

TEST(ServerHostile, LogLinesTellCancelledStreamsAndFreshDurations) {
  TestServer s([](server::ServerOptions& o) { o.n_ctx = 2048; });
  const int port = s.srv->port();
  {
    RawClient c(port);
    json body = greedy("Once upon a time", 1500);
    body["stream"] = true;
    body["ignore_eos"] = true;
    ASSERT_TRUE(c.send(http_request("POST", "/v1/completions", body.dump())));
    std::string got;
    while (got.find("data: ", got.find("data: ") + 1) == std::string::npos) got += c.read_all(0.2);
  }  // the client leaves mid-stream
  // A keep-alive connection idles, then sends garbage: its line counts from the garbage.
  RawClient idle(port);
  ASSERT_TRUE(idle.send(http_request("GET", "/health")));
  ASSERT_TRUE(idle.read_response());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(idle.send("BAD\r\n\r\n"));
  idle.closed_within(5);
  std::string cancelled, bad;
  for (int i = 0; i < 500 && (cancelled.empty() || bad.empty()); ++i) {
    for (const std::string& line : s.log()) {
      if (line.rfind("POST /v1/completions 499 ", 0) == 0) cancelled = line;
      if (line.rfind("- - 400 ", 0) == 0) bad = line;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(cancelled.empty());
  EXPECT_EQ(cancelled.find("tokens=0 "), std::string::npos) << cancelled;
  ASSERT_FALSE(bad.empty());
  const double ms = std::stod(bad.substr(bad.rfind(' ', bad.size() - 4) + 1));
  EXPECT_LT(ms, 1000.0) << bad;
}
