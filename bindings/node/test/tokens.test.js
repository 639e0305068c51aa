'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const tessera = require('..');
const { model, skip } = require('./helpers');

test('tokens, chat templates, embeddings, bench', { skip }, async (t) => {
  const ctx = await tessera.loadModel({ model, n_ctx: 256, n_threads: 1 });
  const emb = await tessera.loadModel({ model, n_ctx: 256, n_threads: 1, embedding: true });
  t.after(() => Promise.all([ctx.release(), emb.release()]));

  await t.test('tokenize/detokenize round trip', async () => {
    for (const text of ['Once upon a time', 'The little dog ran to the park. "Hi!" said Tom.', '  two  spaces', '']) {
      const { tokens } = await ctx.tokenize(text);
      assert.ok(tokens instanceof Int32Array);
      assert.equal(await ctx.detokenize(tokens), text);
      assert.equal(await ctx.detokenize(Array.from(tokens)), text);
    }
    const { tokens } = await ctx.tokenize('Once upon a time');
    assert.ok(tokens.length >= 2);
    assert.ok(!tokens.includes(1), 'no BOS: tokenize adds no special tokens');
    // Control tokens written in the text are parsed as such (llama.node's behaviour).
    assert.deepEqual(Array.from((await ctx.tokenize('</s>')).tokens), [2]);
  });

  await t.test('getFormattedChat with a ChatML template', () => {
    const chatml =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}" +
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    const messages = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Hi' },
    ];
    const turns = '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n';
    assert.equal(ctx.getFormattedChat(messages, chatml), turns + '<|im_start|>assistant\n');
    assert.equal(ctx.getFormattedChat(messages, chatml, { add_generation_prompt: false }), turns);
    assert.throws(() => ctx.getFormattedChat(messages, '{% for %}'), { code: 'TESSERA_INVALID_ARGUMENT' });
    assert.throws(() => ctx.getFormattedChat(messages, chatml, { tools: [] }), /option 'tools' is not supported/);
  });

  await t.test('embedding is unit length and deterministic', async () => {
    const a = (await emb.embedding('Once upon a time')).embedding;
    const b = (await emb.embedding('Once upon a time')).embedding;
    const c = (await emb.embedding('The dog barked at the cat.')).embedding;
    assert.ok(a instanceof Float32Array);
    assert.equal(a.length, ctx.getModelInfo().nEmbd);
    const norm = Math.hypot(...a);
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, c);
    assert.ok(Math.abs(Math.hypot(...c) - 1) < 1e-5);
    await assert.rejects(emb.embedding('x', { embd_normalize: 1 }), /'embd_normalize' must be 2/);
    await assert.rejects(emb.completion({ prompt: 'x' }), /loaded with embedding: true/);
  });

  await t.test('bench reports speeds in llama.node shape', async () => {
    const r = await ctx.bench(32, 16, 2, 2);
    assert.equal(r.pp, 32);
    assert.equal(r.tg, 16);
    assert.equal(r.pl, 2);
    assert.equal(r.nKv, 96);
    assert.equal(r.nKvMax, 256);
    for (const k of ['tPp', 'tTg', 't', 'speedPp', 'speedTg', 'speed']) assert.ok(r[k] > 0, k);
    assert.ok(Math.abs(r.speedPp - (1000 * 64) / r.tPp) < 1e-6 * r.speedPp);
    // The context is usable (and cleared) after a bench.
    const after = await ctx.completion({ prompt: 'Once upon a time', n_predict: 8, temperature: 0 });
    assert.equal(after.tokens_cached, 0);
    assert.equal(after.tokens_predicted, 8);
  });
});
