// `mpirun -np N tessera serve --pipeline` on this machine: concurrent requests, streamed or not, get
// the single server's greedy text on 2 and 3 ranks; /v1/embeddings is refused by name; a SIGTERM to
// rank 0 drains (its running stream ends whole, the job exits 0); a rank killed outright, a stage
// that cannot load and a rank 0 that cannot bind end the job with an error, never a hang;
// --embeddings with --pipeline is an Error.
// Usage: node serve_test.mjs TESSERA MODEL.gguf MPIRUN
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { startServer } from "../start_server.mjs";

const [cli, model, mpirunBin] = process.argv.slice(2);
const env = { ...process.env, OMPI_ALLOW_RUN_AS_ROOT: "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1" };
const children = [];
const common = ["-m", model, "--port", "0", "-np", "2", "-c", "8192", "-t", "1"];
// The drained stream: seconds long, so that it still runs while the test sees rank 0 drain.
const kStreamTokens = 4000;
const prompts = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a big bear"];

function mpirun(ranks, args) {
  const child = spawn(mpirunBin, ["--oversubscribe", "-np", String(ranks), cli, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let log = "";
  child.stdout.on("data", (d) => { log += d; });
  child.stderr.on("data", (d) => { log += d; });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { process: child, exited, log: () => log };
}

// A pipelined server; `port` resolves once rank 0 says every stage is loaded.
function startPipeline(ranks, extra = []) {
  const job = mpirun(ranks, ["serve", ...common, "--pipeline", ...extra]);
  job.port = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the pipeline did not start: " + job.log())), 90000);
    const check = () => {
      const m = job.log().match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && job.log().includes("model loaded")) { clearTimeout(timer); resolve(Number(m[1])); }
    };
    job.process.stdout.on("data", check);
    job.process.stderr.on("data", check);
    job.exited.then((e) => { clearTimeout(timer); reject(new Error(`mpirun exited (${e.code}, ${e.signal}): ${job.log()}`)); });
  });
  return job;
}

// The pid of a rank that mpirun started on this machine (its child with that rank in its environment).
function rankPid(mpirunPid, rank) {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid !== mpirunPid) continue;
      if (readFileSync(`/proc/${d}/environ`, "utf8").split("\0").includes(`OMPI_COMM_WORLD_RANK=${rank}`)) return Number(d);
    } catch {}  // a process that ended meanwhile
  }
  throw new Error(`no rank ${rank} under mpirun ${mpirunPid}`);
}

async function post(port, path, body) {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const completion = (port, prompt) => post(port, "/v1/completions", { prompt, max_tokens: 32, temperature: 0 });

async function streamed(port, prompt) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: 32, temperature: 0, stream: true }),
  });
  assert.equal(r.status, 200);
  const events = (await r.text()).split("\n\n").filter((e) => e.startsWith("data: ") && e !== "data: [DONE]");
  return events.map((e) => JSON.parse(e.slice(6)).choices[0].text).join("");
}

// Every prompt at once (more than the 2 slots), and the first streamed: the single server's text.
async function expectSameText(port, want, what) {
  const got = await Promise.all(prompts.map((p) => completion(port, p)));
  got.forEach((r, i) => {
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.choices[0].text, want[i], `${what}: "${prompts[i]}"`);
  });
  assert.equal(await streamed(port, prompts[0]), want[0], `${what}: streamed`);
}

try {
  // The single process's answers.
  const single = startServer(cli, common);
  children.push(single.process);
  const singlePort = await single.port;
  const want = [];
  for (const p of prompts) {
    const r = await completion(singlePort, p);
    assert.equal(r.status, 200);
    want.push(r.body.choices[0].text);
  }
  single.process.kill("SIGKILL");
  assert.ok(want[0].length > 20, want[0]);

  // 1. Two ranks.
  const two = startPipeline(2);
  const port2 = await two.port;
  assert.match(two.log(), /model loaded/);
  await expectSameText(port2, want, "2 ranks");
  const health = await fetch(`http://127.0.0.1:${port2}/health`);
  assert.equal(health.status, 200);
  const emb = await post(port2, "/v1/embeddings", { input: "hello" });
  assert.equal(emb.status, 501);
  assert.match(emb.body.error.message, /--pipeline/);
  console.log("2 ranks: the single server's text, embeddings refused");

  // 2. SIGTERM to rank 0 drains: a running stream ends whole, then every rank exits 0.
  const long = await fetch(`http://127.0.0.1:${port2}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: prompts[0], max_tokens: kStreamTokens, ignore_eos: true, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  assert.equal(long.status, 200);
  const reader = long.body.getReader();
  const decoder = new TextDecoder();
  let events = decoder.decode((await reader.read()).value);
  process.kill(rankPid(two.process.pid, 0), "SIGTERM");
  let sawDraining = false;
  for (let i = 0; i < 100 && !sawDraining; ++i) {
    const h = await fetch(`http://127.0.0.1:${port2}/health`);
    if (h.status === 503) sawDraining = (await h.json()).status === "draining";
    else await new Promise((r) => setTimeout(r, 5));
  }
  assert.ok(sawDraining, "rank 0 never said draining");
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    events += decoder.decode(value);
  }
  const chunks = events.split("\n\n").filter((e) => e.startsWith("data: ") && e !== "data: [DONE]").map((e) => JSON.parse(e.slice(6)));
  assert.equal(chunks.at(-1).usage?.completion_tokens, kStreamTokens, "the drained stream lost tokens");
  assert.deepEqual(await two.exited, { code: 0, signal: null }, "the drained pipeline did not exit 0:\n" + two.log());
  console.log("2 ranks: drained on SIGTERM to rank 0, the stream ended whole, the job exited 0");

  // 3. Three ranks, uneven shares.
  const three = startPipeline(3, ["--tensor-split", "1,3,1"]);
  const port3 = await three.port;
  await expectSameText(port3, want, "3 ranks");
  // A rank killed outright ends the job (mpirun reports it), never a hang.
  process.kill(rankPid(three.process.pid, 1), "SIGKILL");
  const end = await Promise.race([three.exited, new Promise((r) => setTimeout(() => r("hang"), 60000).unref())]);
  assert.notEqual(end, "hang", "the job went on after a rank was killed:\n" + three.log());
  assert.ok(end.code !== 0 || end.signal !== null, "the job exited 0 after a rank was killed");
  console.log(`3 ranks: the single server's text; a killed rank ended the job (${JSON.stringify(end)})`);

  // 4. What a pipeline does not serve is an Error on every rank, before anything loads.
  const emb2 = mpirun(2, ["serve", ...common, "--pipeline", "--embeddings"]);
  const e2 = await emb2.exited;
  assert.notEqual(e2.code, 0);
  assert.match(emb2.log(), /--embeddings is not served by a pipeline/);

  // 5. A stage that cannot load (rank 1's file cut short), or a rank 0 that cannot bind its port,
  // ends the whole job with that rank's error while the others wait for it.
  const dir = mkdtempSync(join(tmpdir(), "tessera-pipeline-"));
  try {
    const cut = join(dir, "cut.gguf");
    const bytes = readFileSync(model);
    writeFileSync(cut, bytes.subarray(0, bytes.length - 4096));
    const args = (m) => [cli, "serve", "-m", m, "--port", "0", "--pipeline"];
    const broken = spawn(mpirunBin, ["--oversubscribe", "-np", "1", ...args(model), ":", "-np", "1", ...args(cut)], { env, stdio: ["ignore", "pipe", "pipe"] });
    children.push(broken);
    let brokenLog = "";
    broken.stdout.on("data", (d) => { brokenLog += d; });
    broken.stderr.on("data", (d) => { brokenLog += d; });
    const brokenEnd = await new Promise((resolve) => broken.on("exit", (code) => resolve(code)));
    assert.notEqual(brokenEnd, 0);
    assert.match(brokenLog, /tessera: error: rank 1 of 2: .*cut\.gguf/);
  } finally {
    rmSync(dir, { force: true, recursive: true });
  }
  const taken = createServer();
  await new Promise((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const unbindable = mpirun(2, ["serve", "-m", model, "--port", String(taken.address().port), "--pipeline"]);
  const e3 = await unbindable.exited;
  taken.close();
  assert.notEqual(e3.code, 0);
  assert.match(unbindable.log(), /tessera: error: rank 0 of 2: cannot bind/);
  console.log("a stage that cannot load and a port that cannot be bound end the job with their errors");
  console.log("ok");
} finally {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
}
