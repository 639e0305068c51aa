#pragma once
// Quantizing a model file as llama-quantize does (without an importance matrix): the target file
// types (llama.cpp's LLAMA_FTYPE), the type it gives each tensor, and the writer.
#include <array>
#include <cstdint>
#include <functional>
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
// MXFP4_MOE (ftype 38: 3-D expert tensors in MXFP4, every other matrix in Q8_0).
// As in llama-quantize, q3_k, q4_k and q5_k are the _M mixes and q2_k, q6_k the mixes of that name.
const std::vector<FileType>& file_types();
// Case-insensitive lookup; Error(InvalidArgument) naming the accepted names for anything else.
const FileType& file_type(std::string_view name);
// A tensor type by ggml's name, case-insensitive (for --output-type and --token-embedding-type):
// any type the quantizer writes (not Q8_K or I32). Error(InvalidArgument) otherwise.
DType tensor_type(std::string_view name);

struct QuantizeOptions {
  std::string type = "Q4_K_M";       // a file_types() name
  bool pure = false;                 // every quantizable tensor in the base type (no per-tensor choices)
  std::optional<DType> output_type;  // output.weight's type, whatever the mix says
  std::optional<DType> token_embedding_type;  // token_embd.weight's type
  int threads = 0;                            // 0: one per hardware thread
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
// Q2_K/Q3_K/IQ4_XS -> IQ4_NL, then F16). Error(InvalidArgument) for a tensor that would have to be
// re-quantized (its type is quantized or integer and differs from the target) and for a --pure
// type a row width does not fit.
std::vector<TensorPlan> plan_quantization(const gguf::File& in, const QuantizeOptions& options);

struct QuantizeProgress {
  size_t index = 0;  // 1-based
  size_t count = 0;
  const TensorPlan* tensor = nullptr;
  size_t bytes_in = 0, bytes_out = 0;
};

// Writes `out` from `in`: every key/value copied (general.quantization_version and general.file_type
// set, split keys dropped), tensors per plan_quantization, converted on `threads` threads, each
// reported to `progress` once written. Atomic: a failure leaves no `out` (nor out.tmp), and `in` is
// only read. Error(InvalidArgument) when out names the same file as in.
void quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& options,
                    const std::function<void(const QuantizeProgress&)>& progress = {});

}  // namespace tessera::llm
