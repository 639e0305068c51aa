#include "hparam_reader.h"

#include <cmath>

#include "core/check.h"

namespace tessera::llm {

int64_t HparamReader::checked(const std::string& key, int64_t v, int64_t lo, int64_t hi) const {
  if (v < lo || v > hi)
    raise(ErrorCode::CorruptFile, "hyperparameter {} = {} is outside [{}, {}]", full(key), v, lo, hi);
  return v;
}

int64_t HparamReader::required_int(const std::string& key, int64_t lo, int64_t hi) const {
  if (!has(key)) raise(ErrorCode::CorruptFile, "hyperparameter {} is missing", full(key));
  return checked(key, file_->get_int(full(key)), lo, hi);
}

int64_t HparamReader::int_or(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
  return has(key) ? checked(key, file_->get_int(full(key)), lo, hi) : fallback;
}

float HparamReader::float_or(const std::string& key, float fallback, float lo, float hi) const {
  if (!has(key)) return fallback;
  const gguf::Value* v = file_->find(full(key));
  double x = 0.0;
  if (const float* p = std::get_if<float>(v)) {
    x = *p;
  } else if (const double* p = std::get_if<double>(v)) {
    x = *p;
  } else {
    x = static_cast<double>(file_->get_int(full(key)));  // an Error naming the key for other types
  }
  if (!std::isfinite(x) || x < lo || x > hi)
    raise(ErrorCode::CorruptFile, "hyperparameter {} = {} is outside [{}, {}]", full(key), x, lo, hi);
  return static_cast<float>(x);
}

float HparamReader::required_float(const std::string& key, float lo, float hi) const {
  if (!has(key)) raise(ErrorCode::CorruptFile, "hyperparameter {} is missing", full(key));
  return float_or(key, 0.0f, lo, hi);
}

bool HparamReader::bool_or(const std::string& key, bool fallback) const {
  return has(key) ? file_->get_bool(full(key)) : fallback;
}

std::string HparamReader::string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? file_->get_string(full(key)) : fallback;
}

}  // namespace tessera::llm
