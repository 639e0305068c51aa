#include "server/page.h"

namespace tessera::server {

std::string_view chat_page() {
  static constexpr std::string_view kPage = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tessera chat</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 0; display: flex; flex-direction: column; height: 100vh; }
  header { padding: 0.6em 1em; background: #223; color: #eef; }
  #log { flex: 1; overflow-y: auto; padding: 1em; }
  .msg { margin: 0.4em 0; padding: 0.5em 0.8em; border-radius: 8px; max-width: 80%; white-space: pre-wrap; }
  .user { background: #dde8ff; margin-left: auto; }
  .assistant { background: #eee; }
  .error { background: #fdd; }
  form { display: flex; gap: 0.5em; padding: 0.8em; border-top: 1px solid #ccc; }
  #input { flex: 1; padding: 0.5em; font-size: 1em; }
</style>
</head>
<body>
<header>Tessera chat <small id="model"></small></header>
<div id="log"></div>
<form id="form">
  <input id="input" autocomplete="off" placeholder="Type a message">
  <input id="key" type="password" placeholder="API key (if any)" size="12">
  <button id="send" type="submit">Send</button>
</form>
<script>
"use strict";
const log = document.getElementById("log");
const messages = [];
function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  log.appendChild(div);
  log.scrollTop = log.scrollHeight;
  return div;
}
function headers() {
  const h = { "Content-Type": "application/json" };
  const key = document.getElementById("key").value;
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}
fetch("/v1/models", { headers: headers() }).then(r => r.json()).then(j => {
  if (j.data) document.getElementById("model").textContent = j.data[0].id;
}).catch(() => {});
document.getElementById("form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = document.getElementById("input");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  messages.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  let reply = "";
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(),
      body: JSON.stringify({ messages, stream: true, max_tokens: 256 }) });
    if (!res.ok) throw new Error((await res.json()).error.message);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        if (!event.startsWith("data: ")) continue;
        const data = event.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        const delta = j.choices[0].delta;
        if (delta && delta.content) { reply += delta.content; out.textContent = reply; }
      }
    }
    messages.push({ role: "assistant", content: reply });
    out.dataset.done = "1";
  } catch (e) {
    out.className = "msg error";
    out.textContent = "Error: " + e.message;
  }
});
</script>
</body>
</html>
)PAGE";
  return kPage;
}

}  // namespace tessera::server
