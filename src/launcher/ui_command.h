#pragma once
// `lf-train ui OUTPUT_DIR [--port P] [--addr A] [--log-dir DIR] [--config CONFIG.yaml [key=value ...]]`:
// the live page (lf/ui/job_page.h) over a run's output_dir (lf/ui/offline_source.h), finished or
// still running, until Ctrl-C. The running job's own page is node 0's --ui-port.
namespace CLI {
class App;
}

namespace lf {

void add_ui_command(CLI::App& app);

}  // namespace lf
