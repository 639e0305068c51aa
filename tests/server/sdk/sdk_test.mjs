// The official OpenAI SDK for Node against `tessera serve` (stories260K, a template file): chat
// with and without streaming, completions, stop strings, concurrency, cancellation and errors.
// Usage: node sdk_test.mjs TESSERA_CLI MODEL TEMPLATE. Binds 127.0.0.1 on a free port, bounds every
// request in time, stops the server itself.
import assert from "node:assert/strict";
import OpenAI from "openai";

import { startServer } from "../start_server.mjs";

const [cli, model, template] = process.argv.slice(2);
const KEY = "sdk-test-key";
const LILY = ", there was a little girl named Lily. She loved to play outside in the park.";

const started = startServer(cli, ["-m", model, "--port", "0", "-np", "4", "-c", "1024", "-t", "2",
                                 "--api-key", KEY, "--chat-template-file", template, "--batch-chunk", "8"]);
const server = started.process;
const port = await started.port;

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: KEY, timeout: 60000, maxRetries: 0 });
const user = (content) => [{ role: "user", content }];
let failures = 0;
async function test(name, fn) {
  try {
    await fn();
    console.log(`ok - ${name}`);
  } catch (e) {
    failures++;
    console.log(`not ok - ${name}\n  ${e.stack}`);
  }
}
async function collect(stream) {
  let text = "", finish = null, chunks = 0;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta?.content) {
      text += c.delta.content;
      chunks++;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish, chunks };
}

const metric = async (name) => {
  const m = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { Authorization: `Bearer ${KEY}` } })).text();
  return Number(m.match(new RegExp(`\n${name} (\\d+)\n`))[1]);
};

await test("--batch-chunk sets the prompt tokens read per step", async () => {
  const before = await metric("tessera_decode_steps_total");
  const prompt = [1, ...Array.from({ length: 39 }, (_, i) => 300 + i)];
  const r = await client.completions.create({ model: "stories", prompt, max_tokens: 1, temperature: 0 });
  assert.equal(r.usage.prompt_tokens, 40);
  assert.equal(r.usage.completion_tokens, 1);
  // 40 tokens, 8 a step: 5 steps, the last of which samples the one token.
  assert.equal(await metric("tessera_decode_steps_total") - before, 5);
});

await test("chat without streaming", async () => {
  const r = await client.chat.completions.create({ model: "stories", messages: user("Once upon a time"),
                                                   max_tokens: 40, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.ok(r.choices[0].message.content.startsWith(LILY), r.choices[0].message.content);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 40);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 40);
});

await test("chat with streaming gives the same text", async () => {
  const plain = await client.chat.completions.create({ model: "stories", messages: user("Once upon a time"),
                                                       max_tokens: 30, temperature: 0 });
  const s = await client.chat.completions.create({ model: "stories", messages: user("Once upon a time"),
                                                   max_tokens: 30, temperature: 0, stream: true });
  const { text, finish, chunks } = await collect(s);
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, "length");
  // Streamed: one chunk of text per generated token (ASCII, no stop strings), however fast they come.
  assert.equal(chunks, 30, `${chunks} chunks of text`);
});

await test("completions", async () => {
  const r = await client.completions.create({ model: "stories", prompt: "Once upon a time", max_tokens: 20,
                                              temperature: 0 });
  assert.ok(LILY.startsWith(r.choices[0].text) || r.choices[0].text.startsWith(", there was"), r.choices[0].text);
});

await test("stop strings end the reply and are not emitted", async () => {
  const r = await client.chat.completions.create({ model: "stories", messages: user("Once upon a time"),
                                                   max_tokens: 40, temperature: 0, stop: ["Lily", "zzz"] });
  assert.equal(r.choices[0].message.content, ", there was a little girl named ");
  assert.equal(r.choices[0].finish_reason, "stop");
  const s = await client.chat.completions.create({ model: "stories", messages: user("Once upon a time"),
                                                   max_tokens: 40, temperature: 0, stop: "tle gi", stream: true });
  const { text, finish } = await collect(s);
  assert.equal(text, ", there was a lit");
  assert.equal(finish, "stop");
});

await test("concurrent requests get their alone text", async () => {
  const prompts = ["Once upon a time", "The little dog", "One day, a big bear", "Mom said to Ben",
                   "The sun was", "A bird sat on a tree"];
  const ask = (p, stream) => client.chat.completions.create({ model: "stories", messages: user(p), max_tokens: 32,
                                                             temperature: 0, stream });
  const alone = [];
  for (const p of prompts) alone.push((await ask(p, false)).choices[0].message.content);
  const together = await Promise.all(prompts.map(async (p, i) =>
    i % 2 ? (await collect(await ask(p, true))).text : (await ask(p, false)).choices[0].message.content));
  assert.deepEqual(together, alone);
});

await test("an aborted stream cancels its generation", async () => {
  const controller = new AbortController();
  const s = await client.chat.completions.create({ model: "stories", messages: user("Once upon a time"),
                                                   max_tokens: 200, temperature: 0.8, stream: true,
                                                   ignore_eos: true }, { signal: controller.signal });
  let n = 0;
  try {
    for await (const chunk of s) { if (++n === 3) controller.abort(); }
  } catch (e) {
    assert.ok(e.name === "AbortError" || e instanceof OpenAI.APIUserAbortError, String(e));
  }
  let freed = false;
  for (let i = 0; i < 100 && !freed; i++) {
    const m = await (await fetch(`http://127.0.0.1:${port}/metrics`,
                                 { headers: { Authorization: `Bearer ${KEY}` } })).text();
    freed = m.includes("tessera_active_slots 0\n");
    if (!freed) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(freed, "the slot stayed busy");
});

await test("errors", async () => {
  const bad = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: "x", messages: user("Hi") }),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(client.chat.completions.create({ model: "x", messages: user("Hi"), max_tokens: 0 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  await assert.rejects(client.chat.completions.create({ model: "x", messages: [] }),
                       (e) => e instanceof OpenAI.BadRequestError && /messages/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: "x", messages: user("Hi"), top_p: 3 }),
                       (e) => e instanceof OpenAI.UnprocessableEntityError && e.status === 422);
  const models = await client.models.list();
  assert.equal(models.data[0].id, "stories260K.gguf");
});

server.kill("SIGTERM");
const code = await new Promise((resolve) => server.on("exit", (c) => resolve(c)));
if (code !== 0) { console.log(`not ok - the server exited with ${code}: ${started.log()}`); failures++; }
console.log(failures === 0 ? "all passed" : `${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
