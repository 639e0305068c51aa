'use strict';
// 500 load/release cycles must not grow the process: RSS after them, against RSS after a warm-up,
// within 20 MiB. Why that bound: one cycle maps the 1.1 MiB model and allocates a context (a
// 64-cell F16 KV cache and the session's buffers), so a leak of 40 KiB a cycle adds 20 MiB over
// 500 cycles and fails: a leaked model by far, a leaked context alone too (tried: +28.7 MiB).
// What legitimately moves RSS by a few MiB (about +6 here, level after some 1500 cycles) is the JS
// heap (collected before each reading) and glibc's arenas, which keep freed memory of libuv's
// worker threads for reuse instead of returning it.
const test = require('node:test');
const assert = require('node:assert/strict');
const v8 = require('node:v8');
const vm = require('node:vm');
const tessera = require('..');
const { model, skip } = require('./helpers');

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

async function cycles(n) {
  for (let i = 0; i < n; ++i) {
    const ctx = await tessera.loadModel({ model, n_ctx: 64, n_threads: 1 });
    await ctx.release();
  }
}

async function settledRss() {
  for (let i = 0; i < 3; ++i) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  return process.memoryUsage().rss;
}

test('500 load/release cycles do not grow RSS', { skip, timeout: 300000 }, async () => {
  await cycles(100); // warm-up: code pages, arenas, the JS heap's working size
  const before = await settledRss();
  const t0 = Date.now();
  await cycles(500);
  const after = await settledRss();
  const mib = (after - before) / 1048576;
  console.log(`# RSS ${(before / 1048576).toFixed(1)} MiB -> ${(after / 1048576).toFixed(1)} MiB ` +
    `(${mib >= 0 ? '+' : ''}${mib.toFixed(2)} MiB) over 500 cycles, ${Date.now() - t0} ms`);
  assert.ok(mib < 20, `RSS grew ${mib.toFixed(1)} MiB`);
});
