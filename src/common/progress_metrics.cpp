#include "lf/common/progress_metrics.h"

#include <nlohmann/json.hpp>

namespace lf {

const ProgressMetrics::Field ProgressMetrics::kFields[21] = {
    {"loss", &ProgressMetrics::loss},
    {"learning_rate", &ProgressMetrics::learning_rate},
    {"grad_norm", &ProgressMetrics::grad_norm},
    {"epoch", &ProgressMetrics::epoch},
    {"tokens_per_s", &ProgressMetrics::tokens_per_s},
    {"mfu", &ProgressMetrics::mfu},
    {"step_s", &ProgressMetrics::step_s},
    {"comm_exposed_s", &ProgressMetrics::comm_exposed_s},
    {"eval_loss", &ProgressMetrics::eval_loss},
    {"checkpoint_s", &ProgressMetrics::checkpoint_s},
    {"total_steps", &ProgressMetrics::total_steps},
    {"tokens", &ProgressMetrics::tokens},
    {"rewards/accuracies", &ProgressMetrics::rewards_accuracy},
    {"rewards/margins", &ProgressMetrics::rewards_margin},
    {"rewards/chosen", &ProgressMetrics::rewards_chosen},
    {"rewards/rejected", &ProgressMetrics::rewards_rejected},
    {"kl", &ProgressMetrics::kl},
    {"logps/chosen", &ProgressMetrics::logps_chosen},
    {"logps/rejected", &ProgressMetrics::logps_rejected},
    {"logits/chosen", &ProgressMetrics::logits_chosen},
    {"logits/rejected", &ProgressMetrics::logits_rejected},
};

std::string ProgressMetrics::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : kFields)
    if (const auto& v = this->*f.member) j[f.name] = *v;
  // A NaN loss is a number JSON cannot spell: replace, not throw (the agent then sees null).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ProgressMetrics ProgressMetrics::parse(std::string_view json_text) {
  ProgressMetrics m;
  const auto j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return m;
  for (const auto& f : kFields) {
    const auto it = j.find(f.name);
    if (it != j.end() && it->is_number()) m.*f.member = it->get<double>();
  }
  return m;
}

bool ProgressMetrics::set(std::string_view name, double value) {
  for (const auto& f : kFields)
    if (name == f.name) {
      this->*f.member = value;
      return true;
    }
  return false;
}

void ProgressMetrics::merge(const ProgressMetrics& later) {
  for (const auto& f : kFields)
    if (const auto& v = later.*f.member) this->*f.member = v;
}

}  // namespace lf
