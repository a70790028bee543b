#include "attention_shapes.h"

#include "lf/common/log.h"
#include "lf/model/causal_lm.h"
#include "lf/model/sdpa.h"

namespace lf::train {

namespace {
// A bucket this wide gives a 2048-token cutoff 32 shapes at most: plans built once each, early in the run.
constexpr int64_t kFewShapesMultiple = 64;
}  // namespace

bool attention_lengths_vary(const config::JobPlan& c, int64_t pad_multiple) {
  return (c.objective.preference() || !c.data.packing) && pad_multiple < kFewShapesMultiple;
}

void fit_attention_to_rows(const config::JobPlan& c, int64_t pad_multiple, const model::CausalLM& m,
                           const at::TensorOptions& options) {
  const auto& backend = c.model.kernels.sdpa_backend;
  const bool vary = attention_lengths_vary(c, pad_multiple);
  model::use_sdpa_backend(backend, vary);
  if (backend != "auto" || !vary || options.device().type() != c10::DeviceType::CUDA) return;  // cuDNN: CUDA only
  const auto& mc = m.config();
  spdlog::info("attention: rows of varying length (padded to a multiple of {}), so SDPA runs {} and leaves out "
               "cuDNN's attention, which builds a plan for each new shape (LF_SDPA_BACKEND=torch keeps it)",
               pad_multiple, model::sdpa_backend_for(1, 16, mc.num_heads, mc.num_kv_heads, mc.head_dim, options));
}

}  // namespace lf::train
