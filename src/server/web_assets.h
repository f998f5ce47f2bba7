// The chat page served at GET / (src/server/web/: index.html, chat.js, chat.css), embedded into
// the binary at build time by web/embed.cmake, so `mmx serve` reads no files at run time.
#pragma once

#include <string_view>

namespace mmx::server {

struct WebAsset {
  const char* path;          // the URL path it is served at: "/", "/chat.js", "/chat.css"
  const char* content_type;  // with charset
  std::string_view body;
};

// Every embedded asset, in no particular order.
const WebAsset* web_assets_begin();
const WebAsset* web_assets_end();

// The asset served at `path` (a URL path without query), or nullptr.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace mmx::server
