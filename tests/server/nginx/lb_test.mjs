// Two `tessera serve` behind Debian's nginx (upstream, least connections) on 127.0.0.1, as an
// operator deploys them (README, "Behind a load balancer"): requests spread over both; a backend
// killed with SIGKILL is routed around with no client request lost; a backend sent SIGTERM drains:
// /health says "draining", new requests go to the other backend, its running stream ends whole, and
// it exits 0. Usage: node lb_test.mjs TESSERA MODEL.gguf NGINX
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, chmodSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { startServer } from "../start_server.mjs";

const [cli, model, nginxBin] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), "tessera-lb-"));
chmodSync(dir, 0o777);  // nginx's workers run as nobody when the test runs as root
const children = [];
// The drained stream's length: long enough (seconds: most of a slot's 4096 cells, -c 8192 over 2
// slots) that it is still running while the test sees B drain, however busy the machine.
const kStreamTokens = 4000;

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

function backend(port) {
  const b = startServer(cli, ["-m", model, "--port", String(port), "-np", "2", "-c", "8192", "-t", "1", "--drain-timeout", "60"]);
  children.push(b.process);
  b.exited = new Promise((resolve) => b.process.on("exit", (code, signal) => resolve({ code, signal })));
  return b;
}

const served = (b) => (b.log().match(/POST \/v1\/completions 200/g) || []).length;

// A backend writes a request's log line just after the answer: wait for the lines (at most ms).
async function settled(pred, ms = 5000) {
  for (let i = 0; i < ms / 50 && !pred(); ++i) await new Promise((r) => setTimeout(r, 50));
  return pred();
}

async function completion(port, body = {}) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 8, temperature: 0, ...body }),
  });
  return { status: r.status, body: await r.json() };
}

async function health(port) {
  const r = await fetch(`http://127.0.0.1:${port}/health`);
  return { status: r.status, body: await r.json() };
}

try {
  const [portA, portB, portLb] = [await freePort(), await freePort(), await freePort()];
  let a = backend(portA);
  const b = backend(portB);
  await Promise.all([a.port, b.port]);

  for (const d of ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]) rmSync(join(dir, d), { force: true, recursive: true });
  writeFileSync(join(dir, "nginx.conf"), `
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream tessera {
    least_conn;
    server 127.0.0.1:${portA} max_fails=1 fail_timeout=1s;
    server 127.0.0.1:${portB} max_fails=1 fail_timeout=1s;
    keepalive 8;
  }
  server {
    listen 127.0.0.1:${portLb};
    location / {
      proxy_pass http://tessera;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host 127.0.0.1;
      proxy_buffering off;
      proxy_next_upstream error timeout http_503 non_idempotent;
      proxy_read_timeout 60s;
    }
  }
}
`);
  const nginx = spawn(nginxBin, ["-p", dir, "-c", join(dir, "nginx.conf")], { stdio: ["ignore", "ignore", "pipe"] });
  children.push(nginx);
  let nginxLog = "";
  nginx.stderr.on("data", (d) => { nginxLog += d; });
  for (let i = 0; ; ++i) {  // nginx is up once it answers
    try { if ((await health(portLb)).status === 200) break; } catch {}
    assert.ok(i < 100, "nginx did not start: " + nginxLog);
    await new Promise((r) => setTimeout(r, 100));
  }

  // 1. Requests spread over both backends.
  const first = await Promise.all(Array.from({ length: 12 }, () => completion(portLb)));
  for (const r of first) assert.equal(r.status, 200, JSON.stringify(r.body));
  const text = first[0].body.choices[0].text;
  for (const r of first) assert.equal(r.body.choices[0].text, text, "greedy answers differ across backends");
  assert.ok(await settled(() => served(a) + served(b) === 12), `A ${served(a)} + B ${served(b)} != 12`);
  assert.ok(served(a) > 0 && served(b) > 0, `one backend took every request: A ${served(a)}, B ${served(b)}`);
  console.log(`spread: A ${served(a)}, B ${served(b)} of 12`);

  // 2. A backend killed outright is routed around: no request lost.
  a.process.kill("SIGKILL");
  await a.exited;
  const afterKill = [];
  for (let i = 0; i < 4; ++i) afterKill.push(await completion(portLb));
  afterKill.push(...(await Promise.all(Array.from({ length: 8 }, () => completion(portLb)))));
  for (const r of afterKill) assert.equal(r.status, 200, JSON.stringify(r.body));
  console.log(`killed A: ${afterKill.length} of ${afterKill.length} requests answered`);

  // 3. A restarted A serves again; then B drains on SIGTERM while one of its streams runs.
  a = backend(portA);
  await a.port;
  // nginx tries a failed server again after fail_timeout: until A answers through it.
  for (let i = 0; ; ++i) {
    assert.ok(i < 100, "nginx never sent a request to the restarted A");
    assert.equal((await completion(portLb)).status, 200);
    if (await settled(() => served(a) > 0, 100)) break;
  }
  await new Promise((r) => setTimeout(r, 200));  // the last of those requests' log lines
  const stream = await fetch(`http://127.0.0.1:${portB}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: kStreamTokens, ignore_eos: true, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  assert.equal(stream.status, 200);
  const reader = stream.body.getReader();
  const decoder = new TextDecoder();
  let events = (decoder.decode((await reader.read()).value));
  b.process.kill("SIGTERM");
  // Until it stops, B says it is draining and turns new requests away; the balancer sends them to A.
  let sawDraining = false;
  for (let i = 0; i < 100 && !sawDraining; ++i) {
    const h = await health(portB);
    if (h.status === 503) { assert.equal(h.body.status, "draining"); sawDraining = true; }
    else await new Promise((r) => setTimeout(r, 5));
  }
  assert.ok(sawDraining, "B's /health never said draining");
  const refused = await completion(portB);
  assert.equal(refused.status, 503);
  assert.equal(refused.body.error.code, "draining");
  const servedByA = served(a);  // (settled: the loop above waited for A's lines)
  const during = await Promise.all(Array.from({ length: 4 }, () => completion(portLb)));
  for (const r of during) assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.ok(await settled(() => served(a) === servedByA + 4), "requests during B's drain did not all go to A");
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    events += decoder.decode(value);
  }
  const chunks = events.split("\n\n").filter((e) => e.startsWith("data: ") && e !== "data: [DONE]");
  assert.ok(events.trimEnd().endsWith("data: [DONE]"), "the drained stream did not end with [DONE]");
  const parsed = chunks.map((e) => JSON.parse(e.slice(6)));
  assert.ok(parsed.some((c) => c.choices?.[0]?.finish_reason === "length"), "the drained stream did not finish");
  assert.equal(parsed.at(-1).usage?.completion_tokens, kStreamTokens, "the drained stream lost tokens");
  const exit = await b.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, "B did not exit cleanly after its drain");
  // The stream was still running when the drain began: its log line comes after B's "draining".
  const drainAt = b.log().indexOf("draining (SIGTERM");
  const after = drainAt < 0 ? [] : [...b.log().slice(drainAt).matchAll(/tokens=(\d+) /g)].map((m) => Number(m[1]));
  assert.ok(after.some((n) => n >= kStreamTokens),
    "the stream ended before the drain began:\n" + b.log());
  console.log(`drained B: its stream ended whole (${kStreamTokens} tokens), new requests went to A, B exited 0`);
  console.log("ok");
} finally {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  rmSync(dir, { force: true, recursive: true });
}
