'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const tessera = require('..');
const { model, skip, cliGreedy } = require('./helpers');

const prompt = 'Once upon a time';

test('completion', { skip }, async (t) => {
  const ctx = await tessera.loadModel({ model, n_ctx: 2048, n_threads: 1 });
  t.after(() => ctx.release());

  await t.test('streamed tokens equal the CLI and the text', async () => {
    const expected = cliGreedy(prompt, 64);
    const pieces = [];
    const r = await ctx.completion({ prompt, n_predict: 64, temperature: 0 }, (tok) => {
      assert.deepEqual(Object.keys(tok), ['token']);
      pieces.push(tok.token);
    });
    assert.equal(pieces.join(''), expected);
    assert.equal(r.text, expected);
    assert.ok(pieces.length > 1);
    assert.equal(r.tokens_predicted, 64);
    assert.equal(r.stopped_limit, true);
    assert.equal(r.stopped_eos, false);
    assert.equal(r.stopped_word, false);
    assert.equal(r.interrupted, false);
    assert.equal(r.context_full, false);
    assert.equal(r.timings.predicted_n, 64);
    assert.ok(r.timings.predicted_ms > 0 && r.timings.predicted_per_second > 0);
    assert.equal(r.tokens_evaluated, r.timings.prompt_n + r.tokens_cached);
  });

  await t.test('the same prompt again reuses the cached prefix', async () => {
    const r = await ctx.completion({ prompt, n_predict: 64, temperature: 0 });
    assert.equal(r.text, cliGreedy(prompt, 64));
    assert.ok(r.tokens_cached > 0, `tokens_cached ${r.tokens_cached}`);
    assert.equal(r.timings.cache_n, r.tokens_cached);
  });

  await t.test('a stop string ends the text before it', async () => {
    const full = cliGreedy(prompt, 64);
    const r = await ctx.completion({ prompt, n_predict: 64, temperature: 0, stop: ['Lily'] });
    assert.equal(r.stopped_word, true);
    assert.equal(r.text, full.slice(0, full.indexOf('Lily')));
  });

  await t.test('stopCompletion interrupts a running generation', async () => {
    const n = 2000;
    let pieces = '';
    let stopped = false;
    const r = await ctx.completion({ prompt, n_predict: n, temperature: 0, ignore_eos: true }, (tok) => {
      pieces += tok.token;
      if (!stopped) {
        stopped = true;
        ctx.stopCompletion();
      }
    });
    assert.equal(r.interrupted, true);
    assert.ok(r.tokens_predicted >= 1 && r.tokens_predicted < n, `tokens_predicted ${r.tokens_predicted}`);
    assert.equal(r.text, pieces);
    assert.equal(r.stopped_limit, false);
    // The context goes on working.
    const again = await ctx.completion({ prompt, n_predict: 64, temperature: 0 });
    assert.equal(again.text, cliGreedy(prompt, 64));
  });

  await t.test('calls on one context run one at a time, in order', async () => {
    const order = [];
    const a = ctx.completion({ prompt, n_predict: 200, temperature: 0, ignore_eos: true }, () => order.push('a'));
    const b = ctx.completion({ prompt: 'The dog', n_predict: 30, temperature: 0 }, () => order.push('b'));
    const [ra, rb] = await Promise.all([a, b]);
    assert.equal(rb.text, cliGreedy('The dog', 30));
    assert.ok(ra.text.startsWith(cliGreedy(prompt, 64)));
    assert.equal(order.indexOf('b'), order.lastIndexOf('a') + 1, 'b streamed only after a finished');
  });

  await t.test('messages go through the chat template', async () => {
    const chatml =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}" +
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    const messages = [{ role: 'user', content: 'Tell me a story.' }];
    const r = await ctx.completion({ messages, chat_template: chatml, n_predict: 24, temperature: 0 });
    const viaPrompt = await ctx.completion({
      prompt: ctx.getFormattedChat(messages, chatml),
      n_predict: 24,
      temperature: 0,
    });
    assert.equal(r.text, viaPrompt.text);
    assert.ok(r.tokens_predicted > 0);
    // stories260K has no template of its own: the C API's message.
    await assert.rejects(ctx.completion({ messages, n_predict: 4 }), /no chat template/);
  });

  await t.test('sampling with a seed is reproducible', async () => {
    const opts = { prompt, n_predict: 32, temperature: 0.9, top_k: 40, top_p: 0.95, min_p: 0.05, seed: 1234 };
    const a = await ctx.completion(opts);
    const b = await ctx.completion(opts);
    assert.equal(a.text, b.text);
  });
});

test('two contexts generate at once, each correct', { skip }, async () => {
  const [c1, c2] = await Promise.all([
    tessera.loadModel({ model, n_ctx: 2048, n_threads: 1 }),
    tessera.loadModel({ model, n_ctx: 2048, n_threads: 1 }),
  ]);
  try {
    const n = 1000;
    const events = [];
    const [r1, r2] = await Promise.all([
      c1.completion({ prompt, n_predict: n, temperature: 0, ignore_eos: true }, () => events.push(1)),
      c2.completion({ prompt: 'The dog', n_predict: n, temperature: 0, ignore_eos: true }, () => events.push(2)),
    ]);
    assert.ok(r1.text.startsWith(cliGreedy(prompt, 64)));
    assert.ok(r2.text.startsWith(cliGreedy('The dog', 64)));
    // The same generations one at a time give the same text.
    assert.equal((await c1.completion({ prompt, n_predict: n, temperature: 0, ignore_eos: true })).text, r1.text);
    assert.equal(
      (await c2.completion({ prompt: 'The dog', n_predict: n, temperature: 0, ignore_eos: true })).text,
      r2.text,
    );
    // They ran at the same time: the streams interleave.
    const firstTwo = events.indexOf(2);
    assert.ok(firstTwo >= 0 && firstTwo < events.lastIndexOf(1), 'the second stream began before the first ended');
  } finally {
    await Promise.all([c1.release(), c2.release()]);
  }
});

test('grammar, json_schema and response_format constrain the text', { skip }, async (t) => {
  const ctx = await tessera.loadModel({ model, n_ctx: 512, n_threads: 1 });
  t.after(() => ctx.release());
  const yes = await ctx.completion({ prompt, n_predict: 32, temperature: 0, grammar: 'root ::= (" yes" | " no") "."' });
  assert.ok([' yes.', ' no.'].includes(yes.text), yes.text);
  assert.equal(yes.stopped_eos, true);  // the grammar's text is whole
  const schema = { type: 'object', properties: { n: { enum: [1, 2, 3] } }, required: ['n'] };
  for (const options of [{ json_schema: schema }, { json_schema: JSON.stringify(schema) },
                         { response_format: { type: 'json_schema', json_schema: { schema } } }]) {
    const r = await ctx.completion({ prompt, n_predict: 64, temperature: 0, ...options });
    const doc = JSON.parse(r.text);
    assert.ok([1, 2, 3].includes(doc.n), r.text);
  }
  const obj = await ctx.completion({ prompt, n_predict: 64, temperature: 0, response_format: { type: 'json_object' } });
  if (obj.stopped_eos) assert.equal(typeof JSON.parse(obj.text), 'object');
});
