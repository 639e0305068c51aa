#pragma once
// The registry of model architectures: for each `general.architecture` name, the hyperparameters
// and weights it reads from a file, and the builder of its forward graph (from the shared blocks
// in ../blocks.h).
#include <string>

#include "llm/blocks.h"
#include "llm/hparam_reader.h"
#include "llm/weight_plan.h"

namespace tessera::llm {

struct Architecture {
  const char* name;
  // Reads and checks the architecture's own keys, after the common ones (read_hparams) are in h.
  void (*read_hparams)(const HparamReader& r, Hparams& h);
  // Declares every weight the graph reads, with its exact shape from h.
  void (*declare_weights)(WeightPlan& plan);
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
extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kQwen3MoeArchitecture;
extern const Architecture kGptOssArchitecture;
extern const Architecture kPhi3Architecture;
extern const Architecture kGemma2Architecture;
extern const Architecture kGemma3Architecture;
extern const Architecture kBertArchitecture;
extern const Architecture kNomicBertArchitecture;
extern const Architecture kGraniteArchitecture;
extern const Architecture kGraniteMoeArchitecture;
extern const Architecture kOlmoeArchitecture;
extern const Architecture kSmolLm3Architecture;

// What the encoders (bert, nomic-bert) share (arch/bert.cpp): their hyperparameters (LayerNorm
// epsilon, token types, fused or separate Q/K/V), their weights (gated_ffn: nomic-bert's
// ffn_gate; bert's position embeddings are its own), and a K shift that is an Error.
void read_encoder_hparams(const HparamReader& r, Hparams& h);
void declare_encoder_weights(WeightPlan& p, bool gated_ffn);
void no_k_shift(GraphBuild& b, Tensor* shifts);

// Checks of the architectures whose llama.cpp graphs assume them (arch/olmoe.cpp): rope over whole
// heads and value heads as wide as key heads; and no routing key asking for other than a softmax
// over the router's logits, its picked weights renormalised or not as `renormalized` says, unscaled.
void require_full_rope(const HparamReader& r, const Hparams& h);
void refuse_other_moe_routing(const HparamReader& r, bool renormalized);

}  // namespace tessera::llm
