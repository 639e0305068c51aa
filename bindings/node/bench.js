#!/usr/bin/env node
// The binding's streaming overhead: generation tokens/s of completion() with an onToken callback
// (every piece crossing to the JS thread), of completion() without one, and of `tessera run` (the
// CLI, in C++), same model, prompt, threads and token count, greedy past end-of-generation. Median
// of -r runs each, interleaved so that drift of the machine hits all three.
//
//   node bench.js -m MODEL.gguf [-n 128] [-t 0] [-r 3] [-p "Once upon a time"] [--cli PATH]
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const tessera = require('.');

function args() {
  const a = { model: null, n: 128, threads: 0, runs: 3, prompt: 'Once upon a time', cli: null };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const v = argv[i + 1];
    switch (argv[i]) {
      case '-m': a.model = v; ++i; break;
      case '-n': a.n = Number(v); ++i; break;
      case '-t': a.threads = Number(v); ++i; break;
      case '-r': a.runs = Number(v); ++i; break;
      case '-p': a.prompt = v; ++i; break;
      case '--cli': a.cli = v; ++i; break;
      default: throw new Error(`unknown argument ${argv[i]} (see the header of bench.js)`);
    }
  }
  if (!a.model) throw new Error('-m MODEL.gguf is required');
  if (!a.cli) a.cli = require('./test/helpers').cliPath();
  return a;
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

function cliRun(a) {
  const p = spawnSync(
    a.cli,
    ['run', '-m', a.model, '-p', a.prompt, '-n', String(a.n), '--temp', '0', '--ignore-eos', '-t', String(a.threads)],
    { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] },
  );
  if (p.status !== 0) throw new Error(`${a.cli} failed:\n${p.stderr}`);
  const out = p.stderr;
  const m = /generation: (\d+) tokens, ([\d.]+) ms, ([\d.]+) tokens\/s/.exec(out);
  if (!m) throw new Error(`no generation line in the CLI's stderr:\n${out}`);
  return { tokens: Number(m[1]), tps: Number(m[3]) };
}

async function main() {
  const a = args();
  const ctx = await tessera.loadModel({ model: a.model, n_threads: a.threads });
  const info = ctx.getModelInfo();
  console.log(
    `model ${path.basename(a.model)} (${info.architecture}, ${(info.size / 1048576).toFixed(0)} MiB of weights), ` +
      `${a.n} tokens, threads ${a.threads || 'all'}, median of ${a.runs}`,
  );
  // Warm-up: page the weights in for both.
  await ctx.completion({ prompt: a.prompt, n_predict: 8, temperature: 0, ignore_eos: true });
  cliRun({ ...a, n: 8 });
  const node = [], wall = [], quiet = [], cli = [];
  let pieces = 0;
  for (let r = 0; r < a.runs; ++r) {
    // A fresh prompt evaluation each time (bench() leaves the context empty), as the CLI does.
    await ctx.bench(1, 0, 1, 1);
    const t0 = process.hrtime.bigint();
    const res = await ctx.completion({ prompt: a.prompt, n_predict: a.n, temperature: 0, ignore_eos: true }, () => {
      ++pieces;
    });
    const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
    if (res.tokens_predicted !== a.n) throw new Error(`completion generated ${res.tokens_predicted} tokens`);
    node.push(res.timings.predicted_per_second);
    // As the caller sees it: the Promise settled, every piece delivered (prompt time taken off).
    wall.push((1000 * a.n) / (wallMs - res.timings.prompt_ms));
    await ctx.bench(1, 0, 1, 1);
    const q = await ctx.completion({ prompt: a.prompt, n_predict: a.n, temperature: 0, ignore_eos: true });
    quiet.push(q.timings.predicted_per_second);
    const c = cliRun(a);
    if (c.tokens !== a.n) throw new Error(`the CLI generated ${c.tokens} tokens`);
    cli.push(c.tps);
    console.log(
      `run ${r + 1}: completion+onToken ${node.at(-1).toFixed(2)} tokens/s (wall ${wall.at(-1).toFixed(2)}), ` +
        `completion ${quiet.at(-1).toFixed(2)}, tessera run ${c.tps.toFixed(2)} tokens/s`,
    );
  }
  await ctx.release();
  const n = median(node), c = median(cli);
  console.log(`onToken calls: ${pieces} for ${a.n * a.runs} tokens`);
  const w = median(wall), q = median(quiet);
  console.log(
    `median: completion+onToken ${n.toFixed(2)} tokens/s (wall ${w.toFixed(2)}), completion ${q.toFixed(2)}, ` +
      `tessera run ${c.toFixed(2)} tokens/s; with onToken/CLI ${(n / c).toFixed(3)} (wall ${(w / c).toFixed(3)}), ` +
      `with/without onToken ${(n / q).toFixed(3)}`,
  );
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
