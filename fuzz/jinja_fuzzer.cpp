// libFuzzer target for the chat template interpreter. Any input, read as a template, must either
// be rejected with tessera::Error or render (with small limits, on a fixed conversation) to text or
// a tessera::Error: never a crash, a leak, a hang or an unbounded allocation. The messages are
// data: the rendered text's data ranges must be sorted, apart and inside the text.
#include <chrono>
#include <cstdlib>
#include <string_view>

#include "llm/jinja/interpreter.h"
#include "tessera/error.h"

namespace {

using namespace tessera::llm::jinja;

Value conversation() {
  const auto message = [](const char* role, const char* content) {
    Value m = Value::new_dict();
    m.as_dict().mark_keys_from_data();
    m.as_dict().set("role", Value(role).with_data(true));
    m.as_dict().set("content", Value(content).with_data(true));
    return m;
  };
  return Value(List{message("system", "Be brief."), message("user", " Hi\n"),
                    message("assistant", "<think>x</think>y"), message("user", "ünïcode 🙂")});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  Limits limits;
  limits.max_output = 1 << 16;
  limits.max_iterations = 10000;
  limits.max_call_depth = 50;
  limits.max_work_bytes = 1 << 22;
  try {
    const Template t(source);
    const std::vector<std::pair<std::string, Value>> vars{{"messages", conversation()},
                                                          {"add_generation_prompt", Value(true)},
                                                          {"bos_token", Value("<s>")},
                                                          {"eos_token", Value("</s>")}};
    const MarkedString out = t.render(vars, limits, std::chrono::system_clock::time_point{});
    size_t end = 0;
    for (const ByteRange& r : out.data()) {
      if (r.begin >= r.end || r.end > out.size() || (end > 0 && r.begin <= end)) std::abort();
      end = r.end;
    }
  } catch (const tessera::Error&) {
  }
  return 0;
}
