// Whether a run may use CUDA graphs (step_graph.h): the parts that build on every machine.
#include "step_graph.h"

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"

namespace lf::train {

bool cuda_graphs_requested() { return knob_bool("LF_CUDA_GRAPHS").value_or(true); }

int64_t graph_bucket_width() {
  const int64_t w = knob_int("LF_CUDA_GRAPH_BUCKET").value_or(128);
  LF_CHECK(w > 0 && w % 8 == 0, ConfigError,
           "LF_CUDA_GRAPH_BUCKET: expected a positive multiple of 8 (tokens a graphed row is padded to), got {}; "
           "unset it for 128",
           w);
  return w;
}

std::string step_graph_refusal(const StepGraphSetup& s) {
  if (!cuda_graphs_requested()) return "LF_CUDA_GRAPHS=0";
  if (!s.device.is_cuda()) return "not on a GPU";
  if (!s.single_process) return "more than one process (the collectives are not captured)";
  if (s.dropout) return "lora_dropout > 0 (a replay would draw other dropout masks than an eager step)";
  if (s.neat_packing) return "neat_packing (each batch's sequence offsets size the attention kernel's launch)";
  return "";
}

}  // namespace lf::train
