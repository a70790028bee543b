#pragma once
// The live page's files (src/ui/assets/: index.html, app.js, style.css), compiled into the
// binary by a CMake step (cmake/LfEmbedAssets.cmake) so the page needs nothing from outside:
// no CDN, no install folder. Torch-free.
#include <string_view>

namespace lf::ui {

struct PageAsset {
  std::string_view path;  // as served: "/", "/app.js", "/style.css"
  std::string_view content_type;
  std::string_view body;
};

// The asset served at `path`, or null.
const PageAsset* find_page_asset(std::string_view path);
// Every asset's bytes together (a test keeps the page small).
size_t page_assets_size();

}  // namespace lf::ui
