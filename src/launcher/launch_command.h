#pragma once
// `lf-train launch` and `lf-train rdzv-server`: CLI11 wiring of the agent and
// the standalone rendezvous server, with LLaMA-Factory's environment fallbacks.
namespace CLI {
class App;
}

namespace lf {

void add_launch_command(CLI::App& app);
void add_rdzv_server_command(CLI::App& app);

}  // namespace lf
