// The chat page of `tessera serve` in Debian's headless Chromium, driven by puppeteer-core (no
// browser download: it launches the system chromium). Loads `/`, types a message, checks that the
// page asks for a stream of Server-Sent Events and shows the reply as it comes (each state of the
// bubble a prefix of the final text) until it ends without an error, and keeps a screenshot.
// Usage: node page_test.mjs TESSERA_CLI MODEL TEMPLATE CHROMIUM SCREENSHOT.png
// Binds 127.0.0.1 on a free port, bounds everything in time, stops the server and the browser itself.
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";

import { startServer } from "../start_server.mjs";

const [cli, model, template, chromium, screenshot] = process.argv.slice(2);
if (!existsSync(chromium)) {
  console.error(`not ok - no Chromium at '${chromium}' (scripts/install-deps.sh installs Debian's chromium)`);
  process.exit(1);
}
// The whole test is bounded: a hang anywhere fails it, and the server and browser go with it.
let server, browser, profile;
const cleanup = async () => {
  if (browser) await browser.close().catch(() => {});
  if (server && server.exitCode === null) server.kill("SIGTERM");
  if (profile) rmSync(profile, { recursive: true, force: true });
};
const watchdog = setTimeout(async () => {
  console.error("not ok - the page test ran past 150 s");
  await cleanup();
  process.exit(1);
}, 150000);

const started = startServer(cli, ["-m", model, "--port", "0", "-np", "2", "-c", "1024", "-t", "2",
                                 "--chat-template-file", template]);
server = started.process;
const port = await started.port;

let failed = false;
try {
  profile = mkdtempSync(join(tmpdir(), "tessera-chromium-"));
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    // Root in a container or CI: no sandbox; no GPU; /dev/shm may be tiny.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions", "--disable-background-networking"],
    timeout: 60000,
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 640 });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  // Every text the reply bubble shows, recorded in the page as it changes.
  await page.evaluateOnNewDocument(() => {
    window.__replies = [];
    new MutationObserver(() => {
      const bubbles = document.querySelectorAll(".msg.assistant, .msg.error");
      const last = bubbles[bubbles.length - 1];
      if (last && window.__replies[window.__replies.length - 1] !== last.textContent)
        window.__replies.push(last.textContent);
    }).observe(document, { subtree: true, childList: true, characterData: true });
  });
  const response = await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: "load", timeout: 30000 });
  assert.equal(response.status(), 200);
  assert.equal(await page.title(), "Tessera chat");
  // The page asks /v1/models for the model's name.
  await page.waitForFunction(() => document.getElementById("model").textContent !== "", { timeout: 30000 });
  assert.equal(await page.$eval("#model", (e) => e.textContent), "stories260K.gguf");

  // The page asks for a stream and reads Server-Sent Events.
  const chat = page.waitForResponse((r) => r.url().endsWith("/v1/chat/completions"), { timeout: 30000 });
  await page.type("#input", "Once upon a time");
  await page.keyboard.press("Enter");
  const chatResponse = await chat;
  assert.equal(JSON.parse(chatResponse.request().postData()).stream, true);
  assert.equal(chatResponse.status(), 200);
  assert.match(chatResponse.headers()["content-type"], /^text\/event-stream/);
  await page.waitForSelector(".msg.user", { timeout: 10000 });
  assert.equal(await page.$eval(".msg.user", (e) => e.textContent), "Once upon a time");
  // The reply ends (the page marks it done) or fails (an error bubble).
  await page.waitForFunction(() => document.querySelector(".msg.assistant[data-done='1'], .msg.error"),
                             { timeout: 60000 });
  const state = await page.evaluate(() => {
    const b = document.querySelector(".msg.assistant, .msg.error");
    return { cls: b.className, text: b.textContent, replies: window.__replies, input: document.getElementById("input").value };
  });
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${screenshot}`);
  assert.equal(state.cls, "msg assistant", `the reply failed: ${state.text}`);
  assert.ok(state.text.length > 20, `the reply is too short: '${state.text}'`);
  assert.equal(state.input, "", "the input is cleared after sending");
  // The bubble showed the reply as it came, each state a prefix of the final text (how many
  // states depends on how the events meet the network reads: a short reply may come in one).
  const shown = state.replies.filter((t) => t.length > 0);
  assert.ok(shown.length >= 1, "the reply never showed");
  for (const t of shown) assert.ok(state.text.startsWith(t), `'${t}' is not a prefix of the reply '${state.text}'`);
  assert.equal(shown[shown.length - 1], state.text);
  assert.deepEqual(pageErrors, []);
  console.log(`ok - the chat page streams a reply in ${shown.length} updates: ${JSON.stringify(state.text.slice(0, 80))}...`);
} catch (e) {
  failed = true;
  console.log(`not ok - the chat page in headless Chromium\n  ${e.stack}\n  server log:\n${started.log()}`);
} finally {
  clearTimeout(watchdog);
  await cleanup();
}
// The server logged the page, the models request and the streamed chat.
if (!failed && !/GET \/ 200/.test(started.log())) {
  console.log(`not ok - the server did not log the page request:\n${started.log()}`);
  failed = true;
}
process.exit(failed ? 1 : 0);
