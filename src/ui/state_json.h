#pragma once
// Pieces of the page's state JSON the live and the offline sources share. Private to src/ui.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "curves.h"
#include "lf/common/progress_metrics.h"

namespace lf::ui {

// "exit 3", "SIGKILL (signal 9)"; "" for neither.
std::string exit_text(int64_t exit_code, int64_t signal);

// The job's progress block: step, total steps, epoch, loss, lr, grad norm, eval loss, tokens (the
// job's, from global rank 0's record `rank0`), tokens per second (every rank's, summed), MFU (the
// ranks' mean), ETA (remaining steps x the recent mean step time). A missing value is null.
nlohmann::json progress_json(int64_t step, const ProgressMetrics& rank0, std::optional<double> tokens_per_s,
                             std::optional<double> mfu, const Curves& curves);

// nlohmann's dump that never throws on text that is not UTF-8 (a worker's line may be anything).
std::string dump(const nlohmann::json& j);

}  // namespace lf::ui
