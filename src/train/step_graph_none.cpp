// A build without CUDA has no graphs: every micro-step runs eagerly (step_graph.h).
#include "step_graph.h"

namespace lf::train {

std::unique_ptr<MicroStepGraph> make_micro_step_graph(StepGraphSetup) { return nullptr; }

}  // namespace lf::train
