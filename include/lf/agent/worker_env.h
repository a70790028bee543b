#pragma once
// The environment of each worker: the user's environment plus torchrun's
// variables (RANK, LOCAL_RANK, WORLD_SIZE, ... TORCHELASTIC_*), MASTER_ADDR /
// MASTER_PORT for the workers' own store, and lf-train's own (LF_RDZV_*,
// LF_HEARTBEAT_FD) for the store client and the heartbeat channel, LF_NODE_SCRATCH for what the
// node's workers share.
#include <cstdint>
#include <map>
#include <string>

#include "lf/rendezvous/messages.h"

namespace lf::agent {

struct WorkerEnvContext {
  rdzv::LayoutMsg layout;
  std::string master_addr;  // as the agent was given it (used when the layout names none)
  std::string rdzv_addr;
  uint16_t rdzv_port = 0;
  std::string run_id;
  int heartbeat_fd = 3;
  std::string scratch_dir;  // LF_NODE_SCRATCH: the node's folder for files its workers share; empty: unset
};

std::map<std::string, std::string> worker_environment(const std::map<std::string, std::string>& base,
                                                      const WorkerEnvContext& ctx, int64_t local_rank);

}  // namespace lf::agent
