#pragma once
// `lf-train ui OUTPUT_DIR`: the live page over a run's output_dir, finished or not (what
// LLaMA-Factory and lf-train write there): the curves from trainer_state.json's log_history
// (loss, learning rate, grad norm, eval loss), else trainer_log.jsonl; the progress from its last
// entries; all_results.json's figures; each rank's last lines when the run's logs were kept
// (--log-dir: DIR/<rdzv-id>/attempt_<n>/<rank>/{stdout,stderr}.log, the latest attempt); the
// data preview when given the config. The files are read again (at most once a second) while a
// page polls, so a running job's output_dir can be watched from any host that mounts it.
// Threading: the page's io thread.
#include <functional>
#include <memory>
#include <string>

#include "lf/ui/job_page.h"

namespace lf::ui {

struct OfflineOptions {
  std::string output_dir;
  std::string log_dir;  // "" : no logs
  std::function<std::string()> preview;  // empty: none (no --config)
};

// ConfigError when output_dir holds neither trainer_state.json nor trainer_log.jsonl.
std::unique_ptr<PageSource> make_offline_source(OfflineOptions options);

}  // namespace lf::ui
