#pragma once
// The chat page served at `/`: one static HTML file with its script inline (no external assets),
// streaming replies from /v1/chat/completions.
#include <string_view>

namespace tessera::server {

std::string_view chat_page();

}  // namespace tessera::server
