#pragma once
// torchrun's flags that have no lf-train spelling of their own, mapped onto
// lf-train's (or refused, saying why): --standalone, --rdzv-backend,
// --rdzv-endpoint, --no-python; and torchrun's habit of running a `.py` script
// with the Python interpreter. (--nproc_per_node, --node_rank, --master_addr,
// --rdzv_id, ... are aliases in agent_flags.cpp.)
#include <string>
#include <vector>

#include "agent_flags.h"

namespace CLI {
class App;
}

namespace lf {

struct TorchrunFlags {
  bool standalone = false;
  std::string rdzv_backend;
  std::string rdzv_endpoint;
  bool no_python = false;
};

void add_torchrun_flags(CLI::App* cmd, TorchrunFlags& flags);
// Before apply_environment: fills the lf-train flags these stand for; ConfigError
// for a combination that cannot mean anything (--standalone with --nnodes 2, etcd).
void apply_torchrun_flags(const TorchrunFlags& t, LaunchFlags& flags);
// `train.py args` -> `python3 -u train.py args`, as torchrun runs scripts (unless --no-python).
std::vector<std::string> with_python_for_scripts(std::vector<std::string> command, bool no_python);

}  // namespace lf
