'use strict';
// Tessera's Node binding: the addon (build/Release/tessera.node, built by `npm install` from this
// repository's sources) with llama.node's entry points. Everything that returns a Promise rejects
// (never throws) on bad arguments; errors of the C API carry its message (tessera_last_error()) and
// a code such as 'TESSERA_IO_ERROR'.
const path = require('node:path');

const addon = require(path.join(__dirname, 'build', 'Release', 'tessera.node'));

/** Loads a GGUF model and makes its context, on a worker thread. */
async function loadModel(options, onProgress) {
  return addon.loadModel(options, onProgress);
}

/** The devices Tessera finds (the CPU first), in llama.node's shape. */
async function getBackendDevicesInfo() {
  return addon.getBackendDevicesInfo();
}

module.exports = {
  loadModel,
  getBackendDevicesInfo,
  LlamaContext: addon.LlamaContext,
  version: addon.version,
};
