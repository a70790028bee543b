#include "background_json.h"

#include <nlohmann/json.hpp>

namespace lf::ui {

BackgroundJson::BackgroundJson(std::function<std::string()> make, std::string why_none) : make_(std::move(make)) {
  result_ = make_ ? R"({"state": "rendering"})" : nlohmann::json{{"state", "none"}, {"why", why_none}}.dump();
}

BackgroundJson::~BackgroundJson() {
  if (thread_.joinable()) thread_.join();
}

std::string BackgroundJson::get() {
  std::lock_guard lock(mu_);
  if (make_ && !thread_.joinable()) {
    thread_ = std::thread([this, make = std::move(make_)] {
      std::string out;
      try {
        out = make();
      } catch (const std::exception& e) {
        out = nlohmann::json{{"state", "error"}, {"error", e.what()}}.dump(-1, ' ', false,
                                                                         nlohmann::json::error_handler_t::replace);
      }
      std::lock_guard lock(mu_);
      result_ = std::move(out);
    });
    make_ = nullptr;
  }
  return result_;
}

}  // namespace lf::ui
