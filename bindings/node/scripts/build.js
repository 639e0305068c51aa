#!/usr/bin/env node
// Builds the addon from this repository's sources, offline (the `install` script of package.json,
// so `npm install` / `npm ci` in bindings/node runs it):
//  1. the C library, libtessera.so, with the project's own CMake preset in the repository root
//     (TESSERA_PRESET, default "release": build/release; a tree already built is only checked);
//  2. the addon (CMakeLists.txt here) against Node's own headers (no header download: the
//     directory next to the running node, e.g. /usr/include/node, or TESSERA_NODE_INCLUDE) and
//     node-addon-api, into build/Release/tessera.node, with libtessera.so.0 copied beside it and
//     an rpath of $ORIGIN, so the package directory does not depend on the repository's build tree.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const root = path.resolve(here, '../..');
const preset = process.env.TESSERA_PRESET || 'release';
const jobs = String(process.env.TESSERA_BUILD_JOBS || Math.max(1, Math.min(os.cpus().length, 8)));

function run(cmd, args, cwd) {
  console.log(`tessera-node: ${cmd} ${args.join(' ')}`);
  execFileSync(cmd, args, { cwd, stdio: 'inherit' });
}

function presetBinaryDir(name) {
  const presets = JSON.parse(fs.readFileSync(path.join(root, 'CMakePresets.json'), 'utf8'));
  const p = presets.configurePresets.find((c) => c.name === name);
  if (!p) throw new Error(`CMake preset '${name}' is not in ${root}/CMakePresets.json`);
  return path.resolve(p.binaryDir.replace('${sourceDir}', root));
}

function nodeIncludeDir() {
  const candidates = [
    process.env.TESSERA_NODE_INCLUDE,
    path.resolve(path.dirname(process.execPath), '../include/node'),
    '/usr/include/node',
    '/usr/local/include/node',
  ].filter(Boolean);
  const found = candidates.find((d) => fs.existsSync(path.join(d, 'node_api.h')));
  if (!found)
    throw new Error(
      `no Node headers (node_api.h) in ${candidates.join(', ')}: set TESSERA_NODE_INCLUDE ` +
        '(nothing is downloaded)',
    );
  return found;
}

function main() {
  // 1. libtessera.so (and nothing else) from the repository's sources.
  const libBuild = presetBinaryDir(preset);
  if (!fs.existsSync(path.join(libBuild, 'CMakeCache.txt'))) run('cmake', ['--preset', preset], root);
  run('cmake', ['--build', libBuild, '-j', jobs, '--target', 'tessera_c'], root);
  const libDir = path.join(libBuild, 'src/capi');
  if (!fs.existsSync(path.join(libDir, 'libtessera.so.0')))
    throw new Error(`${libDir}/libtessera.so.0 was not built`);

  // 2. The addon.
  const addonApi = require('node-addon-api').include_dir;
  const build = path.join(here, 'build');
  run(
    'cmake',
    [
      '-S', here, '-B', build, '-DCMAKE_BUILD_TYPE=Release',
      `-DTESSERA_ROOT=${root}`, `-DTESSERA_LIB_DIR=${libDir}`,
      `-DNODE_INCLUDE_DIR=${nodeIncludeDir()}`, `-DNODE_ADDON_API_DIR=${path.resolve(here, addonApi)}`,
    ],
    here,
  );
  run('cmake', ['--build', build, '-j', jobs], here);
  // Where the library and the CLI of this build are (the tests run the CLI as their oracle).
  fs.writeFileSync(
    path.join(build, 'tessera-build.json'),
    JSON.stringify({ preset, buildDir: libBuild, cli: path.join(libBuild, 'tessera') }, null, 2) + '\n',
  );
}

try {
  main();
} catch (e) {
  console.error(`tessera-node: build failed: ${e.message}`);
  process.exit(1);
}
