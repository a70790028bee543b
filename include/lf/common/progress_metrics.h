#pragma once
// The numbers a worker's progress beat carries to its agent (heartbeat_line.h's "metrics"
// object): written by lf-worker's training loop, read by the agent's metrics exporter and
// health rules. One struct on both sides, so a field cannot be spelled two ways in two
// processes; the wire stays an open JSON object, so `lf-train launch` scripts may send any
// subset (unknown keys are ignored, a field that is not a number is absent). Torch-free.
#include <optional>
#include <string>
#include <string_view>

namespace lf {

struct ProgressMetrics {
  std::optional<double> loss;            // the last step's training loss (this rank's view)
  std::optional<double> learning_rate;
  std::optional<double> grad_norm;
  std::optional<double> epoch;           // fractional
  std::optional<double> tokens_per_s;    // this rank's target tokens over the step's time
  std::optional<double> mfu;             // 0..1, this rank's share of the step's model FLOPs
  std::optional<double> step_s;          // the last optimizer step's seconds
  std::optional<double> comm_exposed_s;  // communication left after backward (LF_PROFILE_PHASES=1)
  std::optional<double> eval_loss;       // the last evaluation's (kept until the next)
  std::optional<double> checkpoint_s;    // the last checkpoint's save time (kept until the next)
  std::optional<double> total_steps;     // optimizer steps the job runs in all
  std::optional<double> tokens;          // target tokens the job trained on so far, every rank's
  // The preference stages' last step (TRL's rewards/accuracies, rewards/margins, rewards/chosen,
  // rewards/rejected, kl, logps/chosen, logps/rejected, logits/chosen, logits/rejected); absent under sft and pt.
  std::optional<double> rewards_accuracy, rewards_margin, rewards_chosen, rewards_rejected, kl;
  std::optional<double> logps_chosen, logps_rejected, logits_chosen, logits_rejected;

  // Every field's wire name and member, in wire order (parse, to_json and tests walk it).
  struct Field {
    const char* name;
    std::optional<double> ProgressMetrics::*member;
  };
  static const Field kFields[21];

  // The set fields as a compact JSON object ("{}" when none).
  std::string to_json() const;
  // The fields of a JSON object's text; anything else (not JSON, not an object) gives none.
  static ProgressMetrics parse(std::string_view json_text);
  // Sets the field of that wire name; false (nothing set) for a name that is no field.
  bool set(std::string_view name, double value);
  // Fields set in `later` replace this one's.
  void merge(const ProgressMetrics& later);
};

}  // namespace lf
