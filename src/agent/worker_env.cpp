#include "lf/agent/worker_env.h"

#include "lf/common/env_knobs.h"

namespace lf::agent {

std::map<std::string, std::string> worker_environment(const std::map<std::string, std::string>& base,
                                                      const WorkerEnvContext& ctx, int64_t local_rank) {
  const auto& l = ctx.layout;
  auto env = base;
  auto put = [&](const char* k, auto v) {
    if constexpr (std::is_convertible_v<decltype(v), std::string>) env[k] = v;
    else env[k] = std::to_string(v);
  };
  put("RANK", l.rank_base + local_rank);
  put("LOCAL_RANK", local_rank);
  put("WORLD_SIZE", l.world_size);
  put("LOCAL_WORLD_SIZE", l.nproc);
  put("GROUP_RANK", l.node_rank);
  put("GROUP_WORLD_SIZE", l.nnodes);
  // One role ("default") as in torchrun, so role ranks equal global ranks.
  put("ROLE_RANK", l.rank_base + local_rank);
  put("ROLE_WORLD_SIZE", l.world_size);
  put("ROLE_NAME", std::string("default"));
  put("MASTER_ADDR", l.worker_master_addr.empty() ? ctx.master_addr : l.worker_master_addr);
  put("MASTER_PORT", l.worker_master_port);
  put("TORCHELASTIC_RESTART_COUNT", l.generation);
  put("TORCHELASTIC_MAX_RESTARTS", l.max_restarts);
  put("TORCHELASTIC_RUN_ID", ctx.run_id);
  put("TORCHELASTIC_USE_AGENT_STORE", std::string("False"));
  // torchrun's rule: one thread per worker when several share a node, unless the user chose.
  if (!env.count("OMP_NUM_THREADS") && l.nproc > 1) put("OMP_NUM_THREADS", 1);
  put(knob_name("LF_RDZV_ADDR"), ctx.rdzv_addr);
  put(knob_name("LF_RDZV_PORT"), ctx.rdzv_port);
  put(knob_name("LF_HEARTBEAT_FD"), ctx.heartbeat_fd);
  put(knob_name("LF_NODE_RANK"), l.node_rank);
  if (!ctx.scratch_dir.empty()) put(knob_name("LF_NODE_SCRATCH"), ctx.scratch_dir);
  else env.erase(std::string(knob_name("LF_NODE_SCRATCH")));  // never an outer job's folder
  if (l.base_world_size > 0) put(knob_name("LF_BASE_WORLD_SIZE"), l.base_world_size);
  else env.erase(std::string(knob_name("LF_BASE_WORLD_SIZE")));  // not the user's: a fixed-size job has none
  return env;
}

}  // namespace lf::agent
