#pragma once
// The registry of model architectures: for each `general.architecture` name, the builder of its
// forward graph (from the shared blocks in ../blocks.h).
#include <string>

#include "llm/blocks.h"

namespace tessera::llm {

struct Architecture {
  const char* name;
  // Builds one micro-batch's forward pass into b.graph; returns the logits [n_vocab, outputs].
  Tensor* (*build)(GraphBuild& b);
  // Re-ropes the cached K by each cell's shift (KvCache::seq_shift); shifts: I32 [n_cells].
  void (*build_k_shift)(GraphBuild& b, Tensor* shifts);
};

// The architecture called `name`; an Error naming it (and the supported ones) when unknown.
const Architecture& architecture(const std::string& name);
// "llama, ..." for messages.
std::string architecture_names();

// One entry per architecture (defined in arch/<name>.cpp).
extern const Architecture kLlamaArchitecture;

}  // namespace tessera::llm
