#include "options.h"

#include <cmath>

namespace tnode {

Napi::Error type_error(Napi::Env env, const std::string& message, const char* code) {
  Napi::Error error = Napi::TypeError::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  return error;
}

namespace {

std::string joined(std::initializer_list<const char*> keys) {
  std::string out;
  for (const char* k : keys) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

}  // namespace

Options::Options(Napi::Env env, Napi::Value value, std::string where,
                 std::initializer_list<const char*> known)
    : env_(env), where_(std::move(where)) {
  if (value.IsUndefined() || value.IsNull()) {
    object_ = Napi::Object::New(env);
    return;
  }
  if (!value.IsObject() || value.IsArray() || value.IsFunction())
    throw type_error(env, where_ + ": the options must be an object");
  object_ = value.As<Napi::Object>();
  const Napi::Array keys = object_.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    const std::string key = keys.Get(i).ToString().Utf8Value();
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok && !object_.Get(key).IsUndefined())
      throw type_error(env,
                       where_ + ": option '" + key + "' is not supported by Tessera's Node binding (" +
                           where_ + " takes: " + joined(known) + ")",
                       kUnsupported);
  }
}

bool Options::has(const char* key) const { return !object_.Get(key).IsUndefined(); }

Napi::Value Options::raw(const char* key) const { return object_.Get(key); }

Napi::Error Options::refuse(const char* key, const std::string& why) const {
  return type_error(env_, where_ + ": '" + key + "' " + why, kUnsupported);
}

std::optional<double> Options::number(const char* key, double min, double max, bool integer) const {
  const Napi::Value v = object_.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsNumber())
    throw type_error(env_, where_ + ": '" + key + "' must be a number, got " +
                               (v.IsNull() ? std::string("null") : v.ToString().Utf8Value()));
  const double d = v.As<Napi::Number>().DoubleValue();
  if (std::isnan(d) || (integer && d != std::floor(d)))
    throw type_error(env_, where_ + ": '" + key + "' must be " + (integer ? "an integer" : "a number") +
                               ", got " + v.ToString().Utf8Value());
  if (d < min || d > max) {
    Napi::Error e = Napi::RangeError::New(
        env_, where_ + ": '" + key + "' must be in [" + Napi::Number::New(env_, min).ToString().Utf8Value() +
                  ", " + Napi::Number::New(env_, max).ToString().Utf8Value() + "], got " +
                  v.ToString().Utf8Value());
    e.Set("code", Napi::String::New(env_, kBadOption));
    throw e;
  }
  return d;
}

std::optional<bool> Options::boolean(const char* key) const {
  const Napi::Value v = object_.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsBoolean()) throw type_error(env_, where_ + ": '" + key + "' must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

std::optional<std::string> Options::string(const char* key) const {
  const Napi::Value v = object_.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsString()) throw type_error(env_, where_ + ": '" + key + "' must be a string");
  return v.As<Napi::String>().Utf8Value();
}

std::optional<std::vector<std::string>> Options::strings(const char* key) const {
  const Napi::Value v = object_.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsArray()) throw type_error(env_, where_ + ": '" + key + "' must be an array of strings");
  const Napi::Array a = v.As<Napi::Array>();
  std::vector<std::string> out;
  for (uint32_t i = 0; i < a.Length(); ++i) {
    const Napi::Value item = a.Get(i);
    if (!item.IsString())
      throw type_error(env_, where_ + ": '" + key + "' must be an array of strings (item " +
                                 std::to_string(i) + " is not)");
    out.push_back(item.As<Napi::String>().Utf8Value());
  }
  return out;
}

}  // namespace tnode
