// stage sft and pt: the causal-LM loss, summed over the step's target tokens and divided by their
// count (DESIGN "Loss", HF's num_items_in_batch). The trainer's own forward (forward_loss_sum), its
// CUDA graphs of the micro-step (step_graph.h) and its evaluation: this objective only routes to them.
#include <optional>

#include <ATen/record_function.h>

#include "objective.h"
#include "phase_profile.h"
#include "trainer_state.h"

namespace lf::train {
namespace {

class LmObjective : public Objective {
 public:
  explicit LmObjective(Trainer::State& st) : st_(st) {}

  double step_divisor(const std::vector<std::vector<int64_t>>& micro_batches) const override {
    int64_t targets = 0;
    for (const auto& mb : micro_batches)
      for (auto i : mb) targets += hf_num_items(*st_.s.train, i);
    return static_cast<double>(std::max<int64_t>(1, targets));
  }

  MicroStep micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) override {
    const auto b = collate(*st_.s.train, examples, st_.s.pad_id, st_.stepper.pad_multiple);
    std::optional<at::Tensor> graphed;
    if (st_.stepper.graph) {
      RECORD_USER_SCOPE("lf::graph_replay");
      graphed = st_.stepper.graph->run(b, factor);
      if (graphed) phases.lap(Phase::kForward);  // forward and backward in one replay
    }
    MicroStep out;
    out.loss = graphed ? *graphed : st_.eager_micro_step(b, factor, phases);
    if (graphed && st_.aux_coef > 0) {  // [loss sum, load-balancing loss] (step_graph.h)
      st_.aux_step.sum += (*graphed)[1];
      ++st_.aux_step.batches;
      out.loss = (*graphed)[0];
    }
    out.add_rows(b.num_tokens, b.input_ids.size(0), b.input_ids.size(1));
    return out;
  }

  void idle_micro_step() override { st_.forward_backward_without_targets(); }

 private:
  Trainer::State& st_;
};

}  // namespace

std::unique_ptr<Objective> make_lm_objective(Trainer::State& st) { return std::make_unique<LmObjective>(st); }

}  // namespace lf::train
