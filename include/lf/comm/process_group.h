#pragma once
// The worker's place in the job, from the environment lf-train launch sets
// (torchrun's names), and the job's default communicator: NCCL when the
// worker runs on a GPU, the CPU TCP backend otherwise.
#include <memory>
#include <string>

#include "lf/comm/communicator.h"

namespace lf::comm {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int generation = 0;  // TORCHELASTIC_RESTART_COUNT: store keys are namespaced by it
  bool launched = false;  // under lf-train launch (LF_RDZV_PORT set)
  // Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, TORCHELASTIC_RESTART_COUNT;
  // a plain run (none set) is rank 0 of 1. ConfigError on inconsistent values.
  static WorldInfo from_env();
};

// nullptr when world_size == 1 (nothing to communicate). Wrapped in with_collective_check
// when the environment asks for it (LF_COMM_CHECK=1).
std::unique_ptr<Communicator> make_default_communicator(const WorldInfo& world, bool on_gpu, double timeout_s = 600);

}  // namespace lf::comm
