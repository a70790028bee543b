#pragma once
// `lf-train CONFIG.yaml [key=value ...]` and `lf-train train CONFIG.yaml ...`:
// validates the config here (before any node waits on us), then runs the
// agent with `lf-worker train CONFIG.yaml key=value ...` as every worker.
namespace CLI {
class App;
}

namespace lf {

void add_train_command(CLI::App& app);
// For `lf-train CONFIG.yaml ...`: the same, with argv rewritten to `train`.
bool looks_like_config_path(const char* arg);

}  // namespace lf
