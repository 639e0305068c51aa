#pragma once
// Reading an options object: every key must be one the binding implements (a key whose value is
// undefined counts as absent); a key it does not implement, or a value of the wrong type or range,
// is an Error naming the key. Nothing is silently ignored.
#include <napi.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace tnode {

// Errors the binding raises itself carry these codes.
inline constexpr const char* kBadOption = "ERR_TESSERA_INVALID_OPTION";
inline constexpr const char* kUnsupported = "ERR_TESSERA_UNSUPPORTED_OPTION";

// A TypeError (or another Error) with a code.
Napi::Error type_error(Napi::Env env, const std::string& message, const char* code = kBadOption);

class Options {
 public:
  // `where` names the call in messages ("loadModel", "completion"); `known` are the keys it reads.
  Options(Napi::Env env, Napi::Value value, std::string where, std::initializer_list<const char*> known);

  bool has(const char* key) const;
  Napi::Value raw(const char* key) const;
  std::optional<double> number(const char* key, double min, double max, bool integer) const;
  std::optional<bool> boolean(const char* key) const;
  std::optional<std::string> string(const char* key) const;
  std::optional<std::vector<std::string>> strings(const char* key) const;
  // An Error: `key` has a value the binding cannot honour (why).
  Napi::Error refuse(const char* key, const std::string& why) const;

 private:
  Napi::Env env_;
  Napi::Object object_;
  std::string where_;
};

}  // namespace tnode
