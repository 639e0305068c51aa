// llama-quantize's file types, its per-tensor type choices (llama_tensor_get_type, with or without
// an importance matrix), llama.cpp's imatrix files and a streaming, multi-threaded writer of the
// quantized file.
#include "tessera/llm/quantize.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>
#include <thread>

#include "core/check.h"
#include "llm/imatrix_file.h"
#include "tessera/quant.h"

namespace tessera::llm {
namespace {

// llama.cpp's LLAMA_FTYPE numbers.
enum Ftype : uint32_t {
  kAllF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ2_XXS = 19,
  kIQ2_XS = 20,
  kQ2_K_S = 21,
  kIQ3_XS = 22,
  kIQ3_XXS = 23,
  kIQ1_S = 24,
  kIQ4_NL = 25,
  kIQ3_S = 26,
  kIQ3_M = 27,
  kIQ2_S = 28,
  kIQ2_M = 29,
  kIQ4_XS = 30,
  kIQ1_M = 31,
  kBF16 = 32,
  kMXFP4_MOE = 38,
};

constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION

bool equal_nocase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The facts of the model that the type choices read.
struct ModelFacts {
  std::string arch;
  int n_layer = 0;
  int n_head = 0, n_head_kv = 0;
  int n_expert = 0;
  bool has_output = false;  // false: token_embd doubles as the output and is treated as it
  int n_attention_wv = 0;   // tensors named attn_v / attn_qkv / attn_kv_b
  int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 0; }
  bool falcon() const { return arch == "falcon"; }
  // llama.cpp's LLM_TYPE_70B: an 80-layer Llama with grouped-query attention.
  bool llama_70b() const { return arch == "llama" && n_layer == 80 && n_head != n_head_kv; }
};

// An integer hyperparameter stored as a scalar or as a per-layer array (its first element).
int read_int(const gguf::File& f, const std::string& key, int fallback) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) return fallback;
  if (std::holds_alternative<gguf::ArrayValue>(*v)) {
    const auto values = f.get_i32_array(key);
    return values.empty() ? fallback : values[0];
  }
  const int64_t x = f.get_int(key);
  if (x < 0 || x > (1 << 30))
    raise(ErrorCode::CorruptFile, "{}: {} = {} is out of range", f.source(), key, x);
  return static_cast<int>(x);
}

ModelFacts read_facts(const gguf::File& f) {
  ModelFacts m;
  if (f.find("general.architecture") != nullptr) m.arch = f.get_string("general.architecture");
  m.n_layer = read_int(f, m.arch + ".block_count", 0);
  m.n_head = read_int(f, m.arch + ".attention.head_count", 0);
  m.n_head_kv = read_int(f, m.arch + ".attention.head_count_kv", m.n_head);
  m.n_expert = read_int(f, m.arch + ".expert_count", 0);
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight") ||
        contains(t.name, "attn_kv_b.weight"))
      ++m.n_attention_wv;
    else if (t.name == "output.weight")
      m.has_output = true;
  }
  return m;
}

// llama's weight order: tensors outside the blocks first, then by block number; by name within.
int block_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  std::from_chars(begin, name.data() + name.size(), layer);
  return layer;
}

// Dimensions up to the last one above 1 (ggml_n_dims).
int n_dims(const std::array<int64_t, 4>& ne) {
  for (int d = 3; d >= 1; --d)
    if (ne[static_cast<size_t>(d)] > 1) return d + 1;
  return 1;
}

// The tensors llama-quantize converts at all: 2-D and up weights other than norms, expert gates,
// positional and token-type embeddings and a few small per-architecture tensors.
bool is_quantizable(const std::string& name, const std::array<int64_t, 4>& ne) {
  if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  if (n_dims(ne) < 2) return false;
  static constexpr std::string_view kKept[] = {"_norm.weight",
                                               "ffn_gate_inp.weight",
                                               "altup",
                                               "laurel",
                                               "per_layer_model_proj",
                                               "ssm_conv1d.weight",
                                               "shortconv.conv.weight",
                                               "time_mix_first.weight",
                                               "time_mix_w0.weight",
                                               "time_mix_w1.weight",
                                               "time_mix_w2.weight",
                                               "time_mix_v0.weight",
                                               "time_mix_v1.weight",
                                               "time_mix_v2.weight",
                                               "time_mix_a0.weight",
                                               "time_mix_a1.weight",
                                               "time_mix_a2.weight",
                                               "time_mix_g1.weight",
                                               "time_mix_g2.weight",
                                               "time_mix_decay_w1.weight",
                                               "time_mix_decay_w2.weight",
                                               "time_mix_lerp_fused.weight",
                                               "attn_rel_b.weight"};
  for (std::string_view k : kKept)
    if (contains(name, k)) return false;
  return name != "position_embd.weight" && name != "token_types.weight";
}

// More bits for the first and last eighth of the layers and every third one between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

bool fits(DType type, int64_t ne0) { return ne0 % traits(type).block_size == 0; }

// llama_tensor_get_type for the file types above: the mixes' choices per tensor name and layer,
// then the fallback for row widths the type's block does not divide. The counters advance in
// llama's weight order, as llama-quantize's do.
// The I-quant mixes of two bits and below, which share one set of choices.
bool low_bit_iq_mix(uint32_t ft) {
  return ft == kIQ2_XXS || ft == kIQ2_XS || ft == kIQ1_S || ft == kIQ2_S || ft == kIQ2_M || ft == kIQ1_M;
}

// llama.cpp's "attention-v-like" tensors (attn_v, attn_qkv, attn_kv_b; the first match of its
// categories, which test attn_qkv and attn_kv_b before attn_v).
bool attn_v_like(const std::string& name) {
  return contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
         contains(name, "attn_v.weight");
}

class TypeChooser {
 public:
  TypeChooser(const ModelFacts& m, const QuantizeOptions& o, uint32_t ftype, bool has_imatrix)
      : m_(m), o_(o), ftype_(ftype), has_imatrix_(has_imatrix) {}

  DType choose(const std::string& name, int64_t ne0, int64_t ne2, DType type) {
    const uint32_t ft = ftype_;
    if (name == "output.weight" || (!m_.has_output && name == "token_embd.weight")) {
      if (o_.output_type) {
        type = *o_.output_type;
      } else if (ft == kMXFP4_MOE || m_.falcon() || !fits(type, ne0)) {
        type = DType::Q8_0;
      } else if (low_bit_iq_mix(ft) || ft == kIQ3_XXS) {
        type = DType::Q5_K;
      } else if (type != DType::Q8_0) {
        type = DType::Q6_K;
      }
    } else if (ft == kMXFP4_MOE) {
      // The experts (3-D) in MXFP4, every other matrix (token_embd too) in Q8_0.
      type = ne2 > 1 ? DType::MXFP4 : DType::Q8_0;
    } else if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") {
      if (o_.token_embedding_type)
        type = *o_.token_embedding_type;
      else if (ft == kIQ2_XXS || ft == kIQ2_XS || ft == kIQ1_S || ft == kIQ1_M)
        type = DType::Q2_K;
      else if (ft == kIQ2_S || ft == kIQ2_M || ft == kIQ3_XXS)
        type = DType::IQ3_S;
    } else if (low_bit_iq_mix(ft)) {
      const bool two_bit_s = ft == kIQ2_S || ft == kIQ2_M;
      if (attn_v_like(name)) {
        type = m_.n_gqa() >= 4 || m_.n_expert >= 4 ? DType::Q4_K : two_bit_s ? DType::IQ3_S : DType::Q2_K;
        ++i_attention_wv_;
      } else if (m_.n_expert == 8 && contains(name, "attn_k.weight")) {
        type = DType::Q4_K;
      } else if (contains(name, "ffn_down")) {
        if (i_ffn_down_ < m_.n_layer / 8) type = two_bit_s ? DType::IQ3_S : DType::Q2_K;
        ++i_ffn_down_;
      } else if (contains(name, "attn_output.weight")) {
        if (m_.n_expert == 8)
          type = DType::Q5_K;
        else if (ft == kIQ1_S || ft == kIQ1_M)
          type = DType::IQ2_XXS;
        else if (two_bit_s)
          type = DType::IQ3_S;
      }
    } else if (is_iq3_mix(ft) && attn_v_like(name)) {
      if (ft == kIQ3_XXS)
        type = m_.n_gqa() >= 4 ? DType::Q4_K : !has_imatrix_ ? DType::IQ3_S : DType::IQ3_XXS;
      else if ((ft == kIQ3_XS || ft == kIQ3_S) && m_.n_gqa() >= 4)
        type = DType::Q4_K;
      else if (ft == kIQ3_M)
        type = DType::Q4_K;
      if (m_.llama_70b() && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
      if (m_.n_expert == 8) type = DType::Q8_0;
      ++i_attention_wv_;
    } else if (is_iq3_mix(ft) && (contains(name, "ffn_up") || contains(name, "ffn_gate"))) {
      // IQ3_XS takes its middle layers' up and gate projections down to IQ3_XXS.
      int& counter = contains(name, "ffn_up") ? i_ffn_up_ : i_ffn_gate_;
      const int i_layer = layer_of(name, counter), n_layer = m_.n_layer;
      if (ft == kIQ3_XS && i_layer >= n_layer / 8 && i_layer < 7 * n_layer / 8) type = DType::IQ3_XXS;
      ++counter;
    } else if (contains(name, "attn_v.weight")) {
      if (ft == kQ2_K) {
        type = m_.n_gqa() >= 4 ? DType::Q4_K : DType::Q3_K;
      } else if (ft == kQ2_K_S && m_.n_gqa() >= 4) {
        type = DType::Q4_K;
      } else if (ft == kQ3_K_M) {
        type = i_attention_wv_ < 2 ? DType::Q5_K : DType::Q4_K;
      } else if (ft == kQ3_K_L) {
        type = DType::Q5_K;
      } else if ((ft == kIQ4_NL || ft == kIQ4_XS) && m_.n_gqa() >= 4) {
        type = DType::Q5_K;
      } else if ((ft == kQ4_K_M || ft == kQ5_K_M) && use_more_bits(i_attention_wv_, m_.n_attention_wv)) {
        type = DType::Q6_K;
      } else if (ft == kQ4_K_S && i_attention_wv_ < 4) {
        type = DType::Q5_K;
      }
      // The 70B's attn_v is 8x smaller than attn_q (8 heads share it): more bits cost little.
      if (m_.llama_70b() && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
      if (m_.n_expert == 8) type = DType::Q8_0;
      ++i_attention_wv_;
    } else if (contains(name, "attn_k.weight")) {
      if (m_.n_expert == 8)
        type = DType::Q8_0;
      else if (ft == kIQ3_XS)
        type = DType::IQ3_XXS;
      else if (ft == kIQ3_XXS)
        type = DType::IQ2_S;
    } else if (contains(name, "attn_q.weight")) {
      if (ft == kIQ3_XS)
        type = DType::IQ3_XXS;
      else if (ft == kIQ3_XXS)
        type = DType::IQ2_S;
    } else if (contains(name, "ffn_down")) {
      const int i_layer = layer_of(name, i_ffn_down_), n_layer = m_.n_layer;
      if (ft == kQ2_K) {
        type = DType::Q3_K;
      } else if (ft == kQ2_K_S) {
        if (i_layer < n_layer / 8) type = DType::Q4_K;
      } else if (ft == kIQ3_XXS && !has_imatrix_) {
        type = i_layer < n_layer / 8 ? DType::Q4_K : DType::Q3_K;
      } else if (ft == kIQ3_M &&
                 (i_layer < n_layer / 8 || (m_.n_expert == 8 && use_more_bits(i_layer, n_layer)))) {
        type = DType::Q4_K;
      } else if (ft == kQ3_K_M) {
        type = i_layer < n_layer / 16                            ? DType::Q5_K
               : !m_.falcon() || use_more_bits(i_layer, n_layer) ? DType::Q4_K
                                                                 : DType::Q3_K;
      } else if (ft == kQ3_K_L) {
        type = m_.falcon() ? DType::Q4_K : DType::Q5_K;
      } else if (ft == kQ4_K_M) {
        if (m_.falcon())
          type = i_layer < n_layer / 16            ? DType::Q6_K
                 : use_more_bits(i_layer, n_layer) ? DType::Q5_K
                                                   : DType::Q4_K;
        else if (use_more_bits(i_layer, n_layer))
          type = DType::Q6_K;
      } else if (i_layer < n_layer / 8 && (ft == kIQ4_NL || ft == kIQ4_XS) && !has_imatrix_) {
        type = DType::Q5_K;
      } else if (ft == kQ5_K_M && use_more_bits(i_layer, n_layer)) {
        type = DType::Q6_K;
      } else if (ft == kQ4_K_S && !m_.falcon() && i_layer < n_layer / 8) {
        type = DType::Q5_K;
      } else if ((ft == kQ4_0 || ft == kQ5_0) && has_imatrix_ && i_layer < n_layer / 8) {
        // With an importance matrix llama-quantize guards the first ffn_down layers this way.
        type = ft == kQ4_0 ? DType::Q4_1 : DType::Q5_1;
      }
      ++i_ffn_down_;
    } else if (contains(name, "attn_output.weight")) {
      if (!m_.falcon()) {
        if (m_.n_expert == 8) {
          if (ft == kQ2_K || ft == kQ3_K_S || ft == kQ3_K_M || ft == kIQ4_NL || ft == kQ4_K_S ||
              ft == kQ4_K_M || ft == kIQ4_XS || is_iq3_mix(ft))
            type = DType::Q5_K;
        } else if (ft == kQ2_K) {
          type = DType::Q3_K;
        } else if (ft == kIQ3_XXS) {
          type = DType::IQ3_S;
        } else if (ft == kIQ3_M) {
          type = DType::Q4_K;
        } else if (ft == kQ3_K_M) {
          type = DType::Q4_K;
        } else if (ft == kQ3_K_L) {
          type = DType::Q5_K;
        }
      } else if (ft == kQ3_K_L) {
        type = DType::Q4_K;
      }
    } else if (contains(name, "attn_qkv.weight")) {
      if (ft == kQ3_K_M || ft == kQ3_K_L || ft == kIQ3_M)
        type = DType::Q4_K;
      else if (ft == kQ4_K_M)
        type = DType::Q5_K;
      else if (ft == kQ5_K_M)
        type = DType::Q6_K;
    }
    return fallback(name, ne0, type);
  }

 private:
  // The layer of an ffn_down tensor: its position among them, or (with experts, whose tensors are
  // not in layer order) the number in its name.
  int layer_of(const std::string& name, int position) const {
    if (m_.n_expert <= 1) return position;
    const int layer = block_of(name);
    if (layer < 0 || layer >= m_.n_layer)
      raise(ErrorCode::InvalidArgument, "tensor {}: no layer in [0, {}) in its name", name, m_.n_layer);
    return layer;
  }

  static bool is_iq3_mix(uint32_t ft) {
    return ft == kIQ3_XXS || ft == kIQ3_XS || ft == kIQ3_S || ft == kIQ3_M;
  }

  static DType fallback(const std::string& name, int64_t ne0, DType type) {
    if (fits(type, ne0)) return type;
    DType alt;
    switch (type) {
      case DType::IQ1_S:
      case DType::IQ1_M:
      case DType::IQ2_XXS:
      case DType::IQ2_XS:
      case DType::IQ2_S:
      case DType::IQ3_XXS:
      case DType::IQ3_S:
      case DType::Q2_K:
      case DType::Q3_K:
      case DType::IQ4_XS:
        alt = DType::IQ4_NL;
        break;
      case DType::Q4_K:
        alt = DType::Q5_0;
        break;
      case DType::Q5_K:
        alt = DType::Q5_1;
        break;
      case DType::Q6_K:
        alt = DType::Q8_0;
        break;
      default:
        raise(ErrorCode::InvalidArgument, "tensor {}: rows of {} elements do not fit {}'s blocks of {}", name,
              ne0, tessera::name(type), traits(type).block_size);
    }
    return fits(alt, ne0) ? alt : DType::F16;
  }

  const ModelFacts& m_;
  const QuantizeOptions& o_;
  uint32_t ftype_;
  bool has_imatrix_;
  int i_attention_wv_ = 0, i_ffn_down_ = 0, i_ffn_gate_ = 0, i_ffn_up_ = 0;
};

// llama-quantize's tensor_requires_imatrix: the types it will not write without an importance
// matrix, except for token_embd and output (Q2_K only in a Q2_K_S file).
bool requires_imatrix(const std::string& name, DType type, uint32_t ftype) {
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight" || name == "output.weight")
    return false;
  switch (type) {
    case DType::Q2_K:
      return ftype == kQ2_K_S;
    case DType::IQ3_XXS:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ1_M:
    case DType::IQ1_S:
      return true;
    default:
      return false;
  }
}

void check_fits(const TensorPlan& p, DType type, const char* why) {
  if (!fits(type, p.ne[0]))
    raise(ErrorCode::InvalidArgument, "tensor {}: rows of {} elements do not fit {}'s blocks of {} ({})",
          p.name, p.ne[0], name(type), traits(type).block_size, why);
}

// Whether two paths name one file (the second may not exist yet).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const auto ca = std::filesystem::weakly_canonical(a, ec);
  if (ec) return false;
  const auto cb = std::filesystem::weakly_canonical(b, ec);
  if (!ec && ca == cb) return true;
  return std::filesystem::exists(b, ec) && std::filesystem::equivalent(a, b, ec);
}

// Converts one tensor: rows split over threads, each converted to f32 and quantized (under the
// importance of its matrix's columns when there is an importance matrix: ne0 values per matrix).
void convert_tensor(const gguf::TensorInfo& src, const std::byte* data, DType to, std::span<std::byte> out,
                    int threads, const std::vector<float>* importance) {
  const DType from = src.dtype();
  const int64_t ne0 = src.ne[0];
  const int64_t rows = src.ne[1] * src.ne[2] * src.ne[3];
  const size_t in_row = row_bytes(from, ne0), out_row = row_bytes(to, ne0);
  auto work = [&](int64_t first, int64_t last) {
    std::vector<float> buf(from == DType::F32 ? 0 : static_cast<size_t>(ne0));
    for (int64_t r = first; r < last; ++r) {
      const std::byte* row = data + static_cast<size_t>(r) * in_row;
      const float* x = reinterpret_cast<const float*>(row);
      if (from != DType::F32) {
        to_f32_row(from, row, buf.data(), ne0);
        x = buf.data();
      }
      const float* w = nullptr;
      if (importance != nullptr)
        w = importance->data() + static_cast<size_t>((r / src.ne[1]) % src.ne[2] * ne0);
      quantize_weights(to, x, out.data() + static_cast<size_t>(r) * out_row, ne0, w);
    }
  };
  const int64_t n = std::clamp<int64_t>(threads, 1, std::max<int64_t>(rows, 1));
  // A quantizer's Error on a worker thread comes back to the caller (quantize_model checks what it
  // can first, so none is expected).
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  auto guarded = [&](int64_t t) {
    try {
      work(rows * t / n, rows * (t + 1) / n);
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < n; ++t) pool.emplace_back(guarded, t);
  guarded(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

ImportanceMatrix read_imatrix(const std::string& path) {
  const ImatrixFile file = read_imatrix_file(path);
  ImportanceMatrix m;
  m.datasets = file.datasets;
  m.chunk_count = static_cast<int>(file.chunk_count);
  for (const ImatrixFileEntry& e : file.entries) {
    std::vector<float> values = e.in_sum2;
    const size_t per_count = values.size() / e.counts.size();
    for (size_t i = 0; i < values.size(); ++i) {
      const float c = e.counts[i / per_count];
      if (file.legacy) {
        if (c > 0) values[i] /= c;  // means times ncall
      } else {
        // A matrix that never saw input during calibration counts as all ones (llama-quantize).
        values[i] = c > 0 ? values[i] / c : 1.0f;
      }
    }
    for (float v : values)
      if (!std::isfinite(v))
        raise(ErrorCode::CorruptFile, "{}: tensor {} has a non-finite importance", path, e.name);
    m.values.emplace(e.name, std::move(values));
  }
  return m;
}

const std::vector<FileType>& file_types() {
  static const std::vector<FileType> types = {
      {"Q4_0", kQ4_0, DType::Q4_0},
      {"Q4_1", kQ4_1, DType::Q4_1},
      {"Q5_0", kQ5_0, DType::Q5_0},
      {"Q5_1", kQ5_1, DType::Q5_1},
      {"Q8_0", kQ8_0, DType::Q8_0},
      {"Q2_K", kQ2_K, DType::Q2_K},
      {"Q2_K_S", kQ2_K_S, DType::Q2_K},
      {"Q3_K_S", kQ3_K_S, DType::Q3_K},
      {"Q3_K_M", kQ3_K_M, DType::Q3_K},
      {"Q3_K", kQ3_K_M, DType::Q3_K},
      {"Q3_K_L", kQ3_K_L, DType::Q3_K},
      {"Q4_K_S", kQ4_K_S, DType::Q4_K},
      {"Q4_K_M", kQ4_K_M, DType::Q4_K},
      {"Q4_K", kQ4_K_M, DType::Q4_K},
      {"Q5_K_S", kQ5_K_S, DType::Q5_K},
      {"Q5_K_M", kQ5_K_M, DType::Q5_K},
      {"Q5_K", kQ5_K_M, DType::Q5_K},
      {"Q6_K", kQ6_K, DType::Q6_K},
      {"IQ4_NL", kIQ4_NL, DType::IQ4_NL},
      {"IQ4_XS", kIQ4_XS, DType::IQ4_XS},
      {"IQ2_XXS", kIQ2_XXS, DType::IQ2_XXS},
      {"IQ2_XS", kIQ2_XS, DType::IQ2_XS},
      {"IQ2_S", kIQ2_S, DType::IQ2_XS},
      {"IQ2_M", kIQ2_M, DType::IQ2_S},
      {"IQ3_XXS", kIQ3_XXS, DType::IQ3_XXS},
      {"IQ3_XS", kIQ3_XS, DType::IQ3_S},
      {"IQ3_S", kIQ3_S, DType::IQ3_S},
      {"IQ3_M", kIQ3_M, DType::IQ3_S},
      {"IQ1_S", kIQ1_S, DType::IQ1_S},
      {"IQ1_M", kIQ1_M, DType::IQ1_M},
      {"F16", kF16, DType::F16},
      {"BF16", kBF16, DType::BF16},
      {"F32", kAllF32, DType::F32},
      {"MXFP4_MOE", kMXFP4_MOE, DType::MXFP4},
  };
  return types;
}

const FileType& file_type(std::string_view name) {
  for (const FileType& t : file_types())
    if (equal_nocase(t.name, name)) return t;
  std::string names;
  for (const FileType& t : file_types()) {
    if (!names.empty()) names += ' ';
    names += t.name;
  }
  raise(ErrorCode::InvalidArgument, "unknown quantization type '{}' (one of: {})", name, names);
}

DType tensor_type(std::string_view name) {
  for (DType t : kAllDTypes)
    if (t != DType::Q8_K && t != DType::I32 && equal_nocase(tessera::name(t), name)) return t;
  raise(ErrorCode::InvalidArgument,
        "unknown tensor type '{}' (one of: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k "
        "iq4_nl iq4_xs mxfp4 iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m)",
        name);
}

std::vector<TensorPlan> plan_quantization(const gguf::File& in, const QuantizeOptions& options) {
  const FileType& ft = file_type(options.type);
  const ModelFacts facts = read_facts(in);
  std::vector<const gguf::TensorInfo*> order;
  for (const gguf::TensorInfo& t : in.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
    const int la = block_of(a->name), lb = block_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  const bool has_imatrix = !options.imatrix.empty();
  TypeChooser chooser(facts, options, ft.ftype, has_imatrix);
  std::vector<TensorPlan> plan;
  for (const gguf::TensorInfo* t : order) {
    TensorPlan p{t->name, t->ne, t->type_id, t->type_id};
    if (is_quantizable(t->name, t->ne)) {
      DType to = ft.base;
      if (!options.pure && is_quantized(ft.base)) to = chooser.choose(t->name, t->ne[0], t->ne[2], to);
      check_fits(p, to, options.pure ? "--pure keeps every tensor in its type" : "the file type's choice");
      if (options.token_embedding_type && t->name == "token_embd.weight") {
        to = *options.token_embedding_type;
        check_fits(p, to, "--token-embedding-type");
      }
      if (options.output_type && t->name == "output.weight") {
        to = *options.output_type;
        check_fits(p, to, "--output-type");
      }
      if (!has_imatrix && p.from_type_id != traits(to).gguf_id && requires_imatrix(t->name, to, ft.ftype))
        raise(ErrorCode::InvalidArgument,
              "{}: tensor {} would be {}, which llama-quantize writes only with an importance matrix: "
              "give one (--imatrix FILE, e.g. from llama-imatrix)",
              ft.name, t->name, name(to));
      p.to_type_id = traits(to).gguf_id;
      if (p.converted()) {
        const bool floating =
            t->type && (*t->type == DType::F32 || *t->type == DType::F16 || *t->type == DType::BF16);
        if (!floating)
          raise(ErrorCode::InvalidArgument,
                "tensor {} is {}: only f32, f16 and bf16 tensors are quantized (re-quantizing {} would "
                "compound "
                "its error)",
                t->name, t->type_name(), t->type_name());
      }
    }
    plan.push_back(std::move(p));
  }
  return plan;
}

void quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& options,
                    const std::function<void(const QuantizeProgress&)>& progress) {
  const FileType& ft = file_type(options.type);
  // The output is written to out.tmp, then renamed over out: neither may be the input.
  if (same_file(in, out) || same_file(in, out + ".tmp"))
    raise(ErrorCode::InvalidArgument, "the output {} is the input file: choose another name", out);
  const gguf::File file = gguf::File::open(in);
  if (file.find("split.count") != nullptr && file.get_int("split.count") > 1)
    raise(ErrorCode::Unsupported, "{} is one part of a split model: merge it first", in);
  const std::vector<TensorPlan> plan = plan_quantization(file, options);

  // The importance of each converted tensor, checked before anything is written.
  std::optional<ImportanceMatrix> imatrix;
  std::vector<const std::vector<float>*> importance(plan.size(), nullptr);
  if (!options.imatrix.empty()) {
    imatrix = read_imatrix(options.imatrix);
    for (const auto& [name, values] : imatrix->values)
      if (file.find_tensor(name) == nullptr)
        raise(ErrorCode::InvalidArgument,
              "importance matrix {}: tensor {} is not in {} (a matrix for another model?)", options.imatrix,
              name, in);
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const TensorPlan& p = plan[i];
    if (!p.converted()) continue;
    const DType to = *dtype_from_gguf(p.to_type_id);
    if (imatrix) {
      const auto it = imatrix->values.find(p.name);
      if (it != imatrix->values.end()) {
        const int64_t want = p.ne[0] * p.ne[2];
        if (static_cast<int64_t>(it->second.size()) == want)
          importance[i] = &it->second;
        else if (p.name != "token_embd.weight" &&
                 p.name != "per_layer_token_embd.weight")  // llama-quantize ignores those
          raise(ErrorCode::InvalidArgument,
                "importance matrix {}: {} values for tensor {}, which has {} columns x {} matrices",
                options.imatrix, it->second.size(), p.name, p.ne[0], p.ne[2]);
      }
    }
    if (importance[i] == nullptr &&
        (requires_imatrix(p.name, to, ft.ftype) || grid_iquant_needs_importance(to)))
      raise(ErrorCode::InvalidArgument, "tensor {} would be {}, which needs an importance matrix{}", p.name,
            tessera::name(to),
            imatrix ? fmt::format(", and {} has none for it", options.imatrix)
                    : std::string(": give one (--imatrix FILE)"));
  }

  gguf::Writer w;
  // Keys in the input's order, the two llama-quantize sets last (it removes and appends them).
  for (const auto& [key, value] : file.kvs()) {
    if (key == "general.quantization_version" || key == "general.file_type" || key.rfind("split.", 0) == 0)
      continue;
    w.set(key, value);
  }
  w.set("general.quantization_version", kQuantizationVersion);
  w.set("general.file_type", ft.ftype);

  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (size_t i = 0; i < plan.size(); ++i) {
    const TensorPlan& p = plan[i];
    const gguf::TensorInfo& src = *file.find_tensor(p.name);
    const std::byte* data = file.tensor_data(src);
    auto produce = [&file, &src, &p, data, threads, &progress, i, n = plan.size(),
                    w = importance[i]](std::span<std::byte> dst) {
      if (p.converted())
        convert_tensor(src, data, *dtype_from_gguf(p.to_type_id), dst, threads, w);
      else
        std::memcpy(dst.data(), data, dst.size());
      file.release_pages(data, src.nbytes);
      if (progress) progress(QuantizeProgress{i + 1, n, &p, src.nbytes, dst.size()});
    };
    w.add_tensor_deferred(p.name, p.to_type_id, p.ne, produce);  // the writer drops trailing 1s
  }
  w.write(out);
}

}  // namespace tessera::llm
