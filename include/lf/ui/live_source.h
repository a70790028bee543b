#pragma once
// The live page's source on node 0: the rendezvous server's view of the job (lf/rendezvous/
// job_record.h: every node's last status, failures, lines, rank 0's steps), the curves, the
// health rules over every node, and the data preview. Threading: the server's io thread.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lf/metrics/health.h"
#include "lf/rendezvous/server.h"
#include "lf/ui/job_page.h"

namespace lf::ui {

struct LiveSourceOptions {
  // Shown in the page's header: model, method, output_dir, config (the launcher's).
  std::vector<std::pair<std::string, std::string>> facts;
  // The data preview's JSON (lf/data/preview_samples.h), computed off the io thread on the first
  // request; empty: the page says there is none (e.g. `lf-train launch` of a script).
  std::function<std::string()> preview;
  metrics::HealthThresholds thresholds;
};

std::unique_ptr<PageSource> make_live_source(const rdzv::RendezvousServer& server, LiveSourceOptions options);

}  // namespace lf::ui
