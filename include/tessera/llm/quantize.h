#pragma once
// Quantizing a model file as llama-quantize does, with or without an importance matrix: the target
// file types (llama.cpp's LLAMA_FTYPE), the type it gives each tensor, and the writer.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dtype.h"
#include "tessera/gguf.h"

namespace tessera::llm {

// A file type: its name ("Q4_K_M", "q8_0", ...), llama.cpp's number for general.file_type, and the
// type of the weights it does not treat specially.
struct FileType {
  std::string_view name;
  uint32_t ftype;
  DType base;
};
// Every file type the quantizer writes: the plain types q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k
// q6_k iq4_nl iq4_xs f16 bf16 f32 and llama.cpp's mixes Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K,
// MXFP4_MOE (ftype 38: 3-D expert tensors in MXFP4, every other matrix in Q8_0), and the I-quant
// mixes IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS, IQ3_S, IQ3_M, IQ1_S, IQ1_M (most of which
// need an importance matrix).
// As in llama-quantize, q3_k, q4_k and q5_k are the _M mixes and q2_k, q6_k the mixes of that name.
const std::vector<FileType>& file_types();
// Case-insensitive lookup; Error(InvalidArgument) naming the accepted names for anything else.
const FileType& file_type(std::string_view name);
// A tensor type by ggml's name, case-insensitive (for --output-type and --token-embedding-type):
// any type the quantizer writes (not Q8_K or I32). Error(InvalidArgument) otherwise.
// (IQ2_XXS, IQ2_XS and IQ1_S there need an importance matrix entry for the tensor.)
DType tensor_type(std::string_view name);

// An importance matrix (llama.cpp's imatrix): per weight tensor, the importance of each column of
// each of its matrices (ne0 * ne2 values), the mean squared input activation in_sum2 / counts (1
// for a matrix that saw no input).
struct ImportanceMatrix {
  std::map<std::string, std::vector<float>> values;  // by tensor name
  std::vector<std::string> datasets;                 // the calibration texts named in the file
  int chunk_count = 0;
};
// Reads llama.cpp's imatrix files: the GGUF format (tensors NAME.in_sum2 [ne0, n_mat] and
// NAME.counts [1, n_mat], f32, and the keys imatrix.datasets, imatrix.chunk_count,
// imatrix.chunk_size) or the legacy binary .dat (entries of name, call count and values already
// averaged per call). Error(CorruptFile) naming what is wrong: a sum without its counts, other
// shapes or types, truncation, non-finite values; Error(Io) when it cannot be read.
ImportanceMatrix read_imatrix(const std::string& path);

struct QuantizeOptions {
  std::string type = "Q4_K_M";       // a file_types() name
  bool pure = false;                 // every quantizable tensor in the base type (no per-tensor choices)
  std::optional<DType> output_type;  // output.weight's type, whatever the mix says
  std::optional<DType> token_embedding_type;  // token_embd.weight's type
  int threads = 0;                            // 0: one per hardware thread
  std::string imatrix;                        // an importance matrix file (read_imatrix); empty: none
};

// One tensor of the output: its name, shape, the input's type and the chosen one.
struct TensorPlan {
  std::string name;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint32_t from_type_id = 0;  // the input's ggml type id
  uint32_t to_type_id = 0;    // equal to from_type_id for a tensor copied as it is
  bool converted() const noexcept { return from_type_id != to_type_id; }
};

// The output's tensors in llama-quantize's order (tensors outside the blocks by name, then blocks
// by number and name) with the type llama-quantize gives each (llama_tensor_get_type): 1-D tensors,
// norms and the other tensors it never quantizes stay as they are; the mixes raise attn_v,
// ffn_down, attn_output and attn_qkv of chosen layers, output.weight goes to Q6_K, a row width
// that is not a multiple of the type's block falls back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// Q2_K/Q3_K/IQ4_XS and the grid I-quants -> IQ4_NL, then F16). With options.imatrix set the choices
// are llama.cpp's for an importance matrix (IQ3_XXS keeps IQ3_XXS attn_v and ffn_down; IQ4_NL/XS
// keep their first ffn_down layers; Q4_0/Q5_0 raise those to Q4_1/Q5_1). Error(InvalidArgument) for
// a tensor that would have to be re-quantized (its type is quantized or integer and differs from
// the target), for a --pure type a row width does not fit, and, without options.imatrix, for a
// tensor (other than token_embd and output) that would be IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S or
// IQ3_XXS: llama-quantize refuses those without an importance matrix.
std::vector<TensorPlan> plan_quantization(const gguf::File& in, const QuantizeOptions& options);

struct QuantizeProgress {
  size_t index = 0;  // 1-based
  size_t count = 0;
  const TensorPlan* tensor = nullptr;
  size_t bytes_in = 0, bytes_out = 0;
};

// Writes `out` from `in`: every key/value copied (general.quantization_version and general.file_type
// set, split keys dropped), tensors per plan_quantization, converted on `threads` threads, each
// reported to `progress` once written. With options.imatrix each weight is quantized under its
// importance (as llama-quantize's quantize_chunk with imatrix). Atomic: a failure leaves no `out`
// (nor out.tmp), and `in` is only read. Error(InvalidArgument) when out names the same file as in,
// and (before anything is written) when the importance matrix names a tensor the model lacks, has
// the wrong count of values for one (token_embd aside: llama-quantize then quantizes it without),
// or lacks a tensor whose type cannot be written without one.
void quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& options,
                    const std::function<void(const QuantizeProgress&)>& progress = {});

}  // namespace tessera::llm
