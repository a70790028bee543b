// Whether a run may use CUDA graphs (step_graph.h): the parts that build on every machine.
#include "step_graph.h"

namespace lf::train {

std::string step_graph_refusal(const StepGraphSetup& s) {
  if (!s.requested) return "LF_CUDA_GRAPHS=0";
  if (!s.device.is_cuda()) return "not on a GPU";
  if (!s.single_process) return "more than one process (the collectives are not captured)";
  if (s.dropout) return "lora_dropout > 0 (a replay would draw other dropout masks than an eager step)";
  if (s.neat_packing) return "neat_packing (each batch's sequence offsets size the attention kernel's launch)";
  if (s.host_routed_experts)
    return "mixture-of-experts layers without the grouped GEMM (each batch's routing, read on the host, sizes the "
           "experts' GEMMs)";
  if (s.aux_under_scaler) return "the load-balancing loss under fp16 (its gradient weight follows the loss scale)";
  return "";
}

}  // namespace lf::train
