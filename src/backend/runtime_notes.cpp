#include "tessera/runtime_notes.h"

#include <mutex>
#include <utility>

namespace tessera {
namespace {

struct Notes {
  std::mutex mutex;
  std::vector<RuntimeNote> notes;
};

Notes& notes() {
  static Notes n;
  return n;
}

}  // namespace

std::vector<RuntimeNote> runtime_notes() {
  std::lock_guard lock(notes().mutex);
  return notes().notes;
}

void note_runtime_unavailable(std::string runtime, std::string reason) {
  std::lock_guard lock(notes().mutex);
  notes().notes.push_back({std::move(runtime), std::move(reason)});
}

}  // namespace tessera
