// The official OpenAI SDK for Node drives what agents use against `tessera serve` with a real
// model's chat template (Qwen 2.5's, Hermes tool calls): a full tool loop (a required call, the
// tool's result, the answer), the call streamed as deltas, and a json_schema response validated
// by ajv; streamed and non-streamed results are equal (greedy).
// Usage: node agents_test.mjs TESSERA_CLI MODEL TEMPLATE.
import assert from "node:assert/strict";
import Ajv from "ajv";
import OpenAI from "openai";

import { startServer } from "../start_server.mjs";

const [cli, model, template] = process.argv.slice(2);
const started = startServer(cli, ["-m", model, "--port", "0", "-np", "2", "-c", "4096", "-t", "2",
                                 "--chat-template-file", template]);
const server = started.process;
const port = await started.port;
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", timeout: 60000, maxRetries: 0 });
const ajv = new Ajv({ strict: true });
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

const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "The weather in a city", parameters: weather } },
  { type: "function", function: { name: "get_time", description: "The time now",
    parameters: { type: "object", properties: { zone: { type: "string", maxLength: 8 } }, required: ["zone"] } } },
];
const question = [{ role: "user", content: "What is the weather in Paris?" }];

// Tool call deltas joined per index, as an agent framework does.
async function collectCalls(stream) {
  const calls = [];
  let content = "", finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta?.content) content += c.delta.content;
    for (const d of c.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { calls, content, finish };
}

await test("a tool loop: a required call, the tool's result, the answer", async () => {
  const first = await client.chat.completions.create({
    model: "m", messages: question, tools, tool_choice: "required", temperature: 0, max_tokens: 200 });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  const tool = tools.find((t) => t.function.name === call.function.name);
  assert.ok(tool, `an unknown function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(ajv.validate(tool.function.parameters, args), ajv.errorsText());

  // The call streamed: the same function and arguments.
  const streamed = await collectCalls(await client.chat.completions.create({
    model: "m", messages: question, tools, tool_choice: "required", temperature: 0, max_tokens: 200, stream: true }));
  assert.equal(streamed.finish, "tool_calls");
  assert.equal(streamed.content, "");
  assert.equal(streamed.calls.length, 1);
  assert.deepEqual(streamed.calls[0].function, call.function);

  // The agent runs the tool and sends its result back with the assistant's message.
  const messages = [...question, choice.message,
                    { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temperature: 21, sky: "sunny" }) }];
  const answer = await client.chat.completions.create({
    model: "m", messages, tools, tool_choice: "auto", temperature: 0, max_tokens: 24 });
  const reply = answer.choices[0];
  // A tiny story model answers in text; a call would be well-formed too.
  if (reply.finish_reason === "tool_calls") {
    assert.ok(reply.message.tool_calls.length > 0);
  } else {
    assert.ok(["stop", "length"].includes(reply.finish_reason));
    assert.equal(typeof reply.message.content, "string");
    assert.ok(reply.message.content.length > 0);
    assert.equal(reply.message.tool_calls, undefined);
  }
  assert.ok(answer.usage.prompt_tokens > first.usage.prompt_tokens, "the call and its result reached the prompt");

  // A named function.
  const named = await client.chat.completions.create({
    model: "m", messages: question, tools, tool_choice: { type: "function", function: { name: "get_time" } },
    temperature: 0, max_tokens: 200 });
  const t = named.choices[0].message.tool_calls[0];
  assert.equal(t.function.name, "get_time");
  assert.ok(ajv.validate(tools[1].function.parameters, JSON.parse(t.function.arguments)), ajv.errorsText());
});

await test("a json_schema response validates against its schema, streamed or not", async () => {
  const schema = {
    type: "object",
    properties: { name: { type: "string", maxLength: 16 }, age: { type: "integer", minimum: 1, maximum: 99 },
                  pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 3 } },
    required: ["name", "age", "pets"],
    additionalProperties: false,
  };
  const request = { model: "m", messages: [{ role: "user", content: "Describe Lily as JSON." }], temperature: 0,
                    max_tokens: 300, response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } } };
  const r = await client.chat.completions.create(request);
  assert.equal(r.choices[0].finish_reason, "stop");
  const doc = JSON.parse(r.choices[0].message.content);
  assert.ok(ajv.validate(schema, doc), ajv.errorsText());
  let text = "";
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true }))
    text += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(text, r.choices[0].message.content);
});

await test("what cannot be honoured is refused by name", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "m", messages: question, tools,
                                     tool_choice: { type: "function", function: { name: "nope" } } }),
    (e) => e instanceof OpenAI.BadRequestError && /'nope'/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model: "m", messages: question, response_format: { type: "json_schema",
      json_schema: { name: "x", schema: { type: "number", multipleOf: 3 } } } }),
    (e) => e instanceof OpenAI.BadRequestError && /multipleOf/.test(e.message));
});

server.kill("SIGTERM");
const code = await new Promise((resolve) => server.on("exit", (c) => resolve(c)));
if (code !== 0) { console.log(`not ok - the server exited with ${code}: ${started.log()}`); failures++; }
console.log(failures === 0 ? "all passed" : `${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
