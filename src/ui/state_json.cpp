#include "state_json.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "lf/common/wall_clock.h"

namespace lf::ui {

namespace {

nlohmann::json value(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

std::string exit_text(int64_t exit_code, int64_t signal) {
  if (signal > 0) {
    const char* abbrev = ::sigabbrev_np(static_cast<int>(signal));
    return abbrev ? fmt::format("SIG{} (signal {})", abbrev, signal) : fmt::format("signal {}", signal);
  }
  return fmt::format("exit {}", exit_code);
}

nlohmann::json progress_json(int64_t step, const ProgressMetrics& rank0, std::optional<double> tokens_per_s,
                             std::optional<double> mfu, const Curves& curves) {
  nlohmann::json p;
  p["step"] = step;
  p["total_steps"] = rank0.total_steps ? nlohmann::json(static_cast<int64_t>(*rank0.total_steps)) : nlohmann::json(nullptr);
  p["epoch"] = value(rank0.epoch);
  p["loss"] = value(rank0.loss);
  p["lr"] = value(rank0.learning_rate);
  p["grad_norm"] = value(rank0.grad_norm);
  p["eval_loss"] = value(rank0.eval_loss);
  p["tokens"] = value(rank0.tokens);
  p["tokens_per_s"] = value(tokens_per_s);
  p["mfu"] = value(mfu);
  std::optional<double> eta;
  if (rank0.total_steps && *rank0.total_steps >= static_cast<double>(step))
    if (auto s = curves.recent_step_seconds()) eta = (*rank0.total_steps - static_cast<double>(step)) * *s;
  p["eta_s"] = value(eta);
  return p;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace lf::ui
