'use strict';
// Shared by the tests: the model (the repository's ../shared, skipped when absent, as the C++
// tests do) and the tessera CLI of the build the addon links (their oracle).
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.resolve(__dirname, '../../..');
const shared = process.env.TESSERA_SHARED_DIR || path.resolve(root, '../shared');
const model = path.join(shared, 'models/stories260K.gguf');
const skip = fs.existsSync(model) ? false : `no test model (${model})`;

// The CLI: TESSERA_CLI, else the one next to the library the addon was built from, else build/release.
function cliPath() {
  const candidates = [process.env.TESSERA_CLI];
  try {
    const info = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../build/tessera-build.json'), 'utf8'));
    candidates.push(info.cli);
  } catch {}
  candidates.push(path.join(root, 'build/release/tessera'));
  const found = candidates.find((p) => p && fs.existsSync(p));
  if (!found)
    throw new Error(
      `no tessera CLI in ${candidates.filter(Boolean).join(', ')}: build it (cmake --build --preset release ` +
        '--target tessera_cli) or set TESSERA_CLI',
    );
  return found;
}

// `tessera run` stdout minus the echoed prompt and the final newline.
function cliGreedy(prompt, n, extra = []) {
  const out = execFileSync(cliPath(), ['run', '-m', model, '-p', prompt, '-n', String(n), '--temp', '0', ...extra], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  if (!out.startsWith(prompt) || !out.endsWith('\n')) throw new Error(`unexpected CLI output: ${JSON.stringify(out)}`);
  return out.slice(prompt.length, -1);
}

module.exports = { root, shared, model, skip, cliPath, cliGreedy };
