#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

const Architecture* const kArchitectures[] = {
    &kLlamaArchitecture,     &kQwen2Architecture,  &kQwen3Architecture,   &kQwen3MoeArchitecture,
    &kPhi3Architecture,      &kGemma2Architecture, &kGemma3Architecture,  &kBertArchitecture,
    &kNomicBertArchitecture, &kGptOssArchitecture, &kGraniteArchitecture, &kGraniteMoeArchitecture,
    &kOlmoeArchitecture,     &kSmolLm3Architecture};

}  // namespace

const Architecture& architecture(const std::string& name) {
  for (const Architecture* a : kArchitectures)
    if (name == a->name) return *a;
  raise(ErrorCode::Unsupported, "model architecture '{}' is not supported (supported: {})", name,
        architecture_names());
}

std::string architecture_names() {
  std::string out;
  for (const Architecture* a : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += a->name;
  }
  return out;
}

}  // namespace tessera::llm
