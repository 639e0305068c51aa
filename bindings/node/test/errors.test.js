'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tessera = require('..');
const { model, skip } = require('./helpers');

const prompt = 'Once upon a time';

test('a bad model path rejects with the C API message', async () => {
  const bad = path.join(os.tmpdir(), 'no-such-dir', 'model.gguf');
  await assert.rejects(tessera.loadModel({ model: bad }), (e) => {
    assert.equal(e.code, 'TESSERA_IO_ERROR');
    assert.match(e.message, /cannot open/);
    assert.ok(e.message.includes(bad), e.message);
    return true;
  });
  // A file that is not GGUF.
  const notGguf = path.join(os.tmpdir(), `tessera-node-${process.pid}.gguf`);
  fs.writeFileSync(notGguf, 'this is not a GGUF file, just some text of a reasonable length...');
  try {
    await assert.rejects(tessera.loadModel({ model: notGguf }), { code: 'TESSERA_CORRUPT_FILE' });
  } finally {
    fs.unlinkSync(notGguf);
  }
});

test('bad loadModel parameters reject by name', async () => {
  const cases = [
    [{}, /'model'/],
    [{ model: 42 }, /'model' must be a string/],
    [{ model, flash_attn: true }, /option 'flash_attn' is not supported/],
    [{ model, lora: 'x.gguf' }, /option 'lora' is not supported/],
    [{ model, n_ctx: -1 }, /'n_ctx' must be in/],
    [{ model, n_ctx: 1.5 }, /'n_ctx' must be an integer/],
    [{ model, n_threads: 'two' }, /'n_threads' must be a number/],
    [{ model, embedding: 1 }, /'embedding' must be a boolean/],
    [{ model, devices: ['CPU', 'OpenCL0'] }, /'devices' holds 2 devices \(CPU, OpenCL0\): only one device/],
    [{ model, devices: 'CPU' }, /'devices' must be an array/],
  ];
  for (const [opts, re] of cases) await assert.rejects(tessera.loadModel(opts), re, JSON.stringify(opts));
  await assert.rejects(tessera.loadModel({ model }, 'not a function'), /onProgress must be a function/);
  // Options set to undefined are absent, as in llama.node.
  if (!skip) await (await tessera.loadModel({ model, lora: undefined, n_ctx: 64 })).release();
});

test('loadModel reports progress and an unknown device fails in the C API', { skip }, async () => {
  const fractions = [];
  const ctx = await tessera.loadModel({ model, n_ctx: 64 }, (f) => fractions.push(f));
  assert.equal(fractions[0], 0);
  assert.equal(fractions.at(-1), 1, 'every progress event arrives before the Promise settles');
  await ctx.release();
  await assert.rejects(tessera.loadModel({ model, n_gpu_layers: 1, devices: ['NoSuchDevice7'] }), /NoSuchDevice7/);
  // A progress callback that throws cancels the load and rejects with its error.
  await assert.rejects(
    tessera.loadModel({ model }, () => {
      throw new Error('no thanks');
    }),
    /no thanks/,
  );
});

test('bad completion parameters reject by name', { skip }, async (t) => {
  const ctx = await tessera.loadModel({ model, n_ctx: 256, n_threads: 1 });
  t.after(() => ctx.release());
  const cases = [
    [{ prompt, grammar: 'root ::= (' }, /TESSERA_INVALID_ARGUMENT|grammar/],
    [{ prompt, grammar: 'root ::= "a"', json_schema: {} }, /at most one of grammar/],
    [{ prompt, json_schema: { type: 'number', multipleOf: 2 } }, /multipleOf/],
    [{ prompt, response_format: { type: 'xml' } }, /'response_format' must be/],
    [{ prompt, mirostat: 2 }, /option 'mirostat' is not supported/],
    [{ prompt, n_probs: 5 }, /option 'n_probs' is not supported/],
    [{ prompt, n_predict: -2 }, /'n_predict' must be in/],
    [{ prompt, top_k: 'x' }, /'top_k' must be a number/],
    [{ prompt, min_p: 2 }, /'min_p' must be in/],
    [{ prompt, stop: 'x' }, /'stop' must be an array of strings/],
    [{ prompt, stop: [''] }, /'stop' cannot hold an empty string/],
    [{ prompt, jinja: false }, /'jinja' cannot be false/],
    [{ prompt, chat_template: 'x' }, /'chat_template' applies to 'messages' only/],
    [{}, /either 'prompt'/],
    [{ prompt, messages: [] }, /either 'prompt'/],
    [{ messages: 'hi' }, /'messages' must be an array/],
  ];
  for (const [opts, re] of cases) await assert.rejects(ctx.completion(opts), re, JSON.stringify(opts));
  await assert.rejects(ctx.completion({ prompt }, 5), /onToken must be a function/);
  await assert.rejects(ctx.bench(0, 1, 1, 1), /'pp' must be an integer/);
  await assert.rejects(ctx.bench(200, 100, 2, 1), /do not fit the context of 256/);
  await assert.rejects(ctx.tokenize(5), /must be a string/);
  await assert.rejects(ctx.detokenize([1, 'a']), /token 1 is not an integer/);
  await assert.rejects(ctx.detokenize([100000]), { code: 'TESSERA_INVALID_ARGUMENT' });
  await assert.rejects(ctx.embedding('x'), /not loaded with embedding: true/);
  assert.throws(() => ctx.getFormattedChat([{ role: 'user', content: 'x' }]), /no chat template/);
  // A callback that throws stops the completion and rejects it with its error.
  await assert.rejects(
    ctx.completion({ prompt, n_predict: 500, ignore_eos: true, temperature: 0 }, () => {
      throw new Error('callback failed');
    }),
    /callback failed/,
  );
});

test('saveSession and loadSession: a restored prompt is not evaluated again', { skip }, async (t) => {
  const a = await tessera.loadModel({ model, n_ctx: 256, n_threads: 1 });
  const b = await tessera.loadModel({ model, n_ctx: 256, n_threads: 1 });
  t.after(() => Promise.all([a.release(), b.release()]));
  const first = await a.completion({ prompt, n_predict: 16, temperature: 0 });
  const file = path.join(os.tmpdir(), `tessera-node-session-${process.pid}.bin`);
  t.after(() => fs.rmSync(file, { force: true }));
  await a.saveSession(file);
  await b.loadSession(file);
  const again = await b.completion({ prompt, n_predict: 16, temperature: 0 });
  assert.equal(again.text, first.text);
  assert.equal(again.tokens_cached, again.tokens_evaluated - 1);  // all but the last prompt token
  // A flipped byte: the C API's "corrupted", and the context still answers as before.
  const bytes = fs.readFileSync(file);
  bytes[100] ^= 0x40;
  fs.writeFileSync(file, bytes);
  await assert.rejects(b.loadSession(file), (e) => e.code === 'TESSERA_CORRUPT_FILE' && /corrupt/.test(e.message));
  await assert.rejects(b.loadSession('/nonexistent/session.bin'), { code: 'TESSERA_IO_ERROR' });
  const third = await b.completion({ prompt, n_predict: 16, temperature: 0 });
  assert.equal(third.text, first.text);
});

test('release: later calls fail, a running completion is cancelled, queued calls fail', { skip }, async () => {
  const ctx = await tessera.loadModel({ model, n_ctx: 2048, n_threads: 1 });
  let first = true;
  let release;
  const running = ctx.completion({ prompt, n_predict: 2000, ignore_eos: true, temperature: 0 }, () => {
    if (first) {
      first = false;
      release = ctx.release(); // during the generation
    }
  });
  // Queued behind it (handlers attached at once: they reject as soon as release() is called).
  const queued = assert.rejects(ctx.completion({ prompt, n_predict: 10 }), { code: 'ERR_TESSERA_RELEASED' });
  const queuedBench = assert.rejects(ctx.bench(8, 8, 1, 1), { code: 'ERR_TESSERA_RELEASED' });
  const r = await running;
  assert.equal(r.interrupted, true);
  assert.ok(r.tokens_predicted < 2000);
  await queued;
  await queuedBench;
  await release;
  await assert.rejects(ctx.completion({ prompt }), { code: 'ERR_TESSERA_RELEASED', message: /completion: the context was released/ });
  await assert.rejects(ctx.tokenize('x'), { code: 'ERR_TESSERA_RELEASED' });
  await assert.rejects(ctx.release(), { code: 'ERR_TESSERA_RELEASED' });
  assert.throws(() => ctx.getFormattedChat([]), { code: 'ERR_TESSERA_RELEASED' });
  assert.throws(() => ctx.stopCompletion(), { code: 'ERR_TESSERA_RELEASED' });
});

test('a context cannot be made with new', () => {
  assert.throws(() => new tessera.LlamaContext({ model }), /made by loadModel/);
});

test('getBackendDevicesInfo lists the CPU first', async () => {
  const devices = await tessera.getBackendDevicesInfo();
  assert.ok(devices.length >= 1);
  assert.equal(devices[0].deviceName, 'CPU');
  assert.equal(devices[0].type, 'cpu');
  assert.ok(devices[0].maxMemorySize > 0);
  assert.deepEqual(tessera.LlamaContext.getBackendDevicesInfo(), devices);
});
