#pragma once
// Which attention kernel suits the run's row shapes (model/sdpa.h's use_sdpa_backend, lengths_vary). Why: torch
// caches cuDNN's attention plans by exact shape and builds one for each new [B, T] (tens of milliseconds), so a
// run whose rows change length every micro-batch (preference pairs, unpacked rows padded to a multiple of 8)
// paid that build in most of its forwards and backwards; packed rows, or unpacked rows that CUDA graphs pad to
// their bucket, meet few shapes and keep torch's order (cuDNN first on Hopper). Internal to lf_train.
#include <c10/core/TensorOptions.h>

#include <cstdint>

#include "lf/config/job_plan.h"

namespace lf::model {
class CausalLM;
}

namespace lf::train {

// Whether the run's attention meets a new shape at most forwards: rows not packed (or a preference stage,
// which pairs its rows unpacked), padded to a multiple of fewer than 64 tokens.
bool attention_lengths_vary(const config::JobPlan& c, int64_t pad_multiple);

// Installs SDPA's backend for the run's rows (LF_SDPA_BACKEND; auto leaves cuDNN out when the lengths vary) and,
// when auto did on a GPU (cuDNN is CUDA's), says so with the kernel the training attention now runs (`options`).
void fit_attention_to_rows(const config::JobPlan& c, int64_t pad_multiple, const model::CausalLM& m,
                           const at::TensorOptions& options);

}  // namespace lf::train
