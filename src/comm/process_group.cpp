#include "lf/comm/process_group.h"

#include <fmt/format.h>

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"

namespace lf::comm {

WorldInfo WorldInfo::from_env() {
  WorldInfo w;
  w.rank = static_cast<int>(env_int("RANK").value_or(0));
  w.world_size = static_cast<int>(env_int("WORLD_SIZE").value_or(1));
  w.local_rank = static_cast<int>(env_int("LOCAL_RANK").value_or(0));
  w.local_world_size = static_cast<int>(env_int("LOCAL_WORLD_SIZE").value_or(1));
  w.node_rank = static_cast<int>(env_int("GROUP_RANK").value_or(0));
  w.generation = static_cast<int>(env_int("TORCHELASTIC_RESTART_COUNT").value_or(0));
  w.launched = knob_int("LF_RDZV_PORT").has_value();
  LF_CHECK(w.world_size >= 1 && w.rank >= 0 && w.rank < w.world_size, ConfigError,
           "RANK={} WORLD_SIZE={} is not a valid rank: run workers through `lf-train launch`", w.rank, w.world_size);
  LF_CHECK(w.local_rank >= 0 && w.local_rank < w.local_world_size, ConfigError, "LOCAL_RANK={} LOCAL_WORLD_SIZE={}",
           w.local_rank, w.local_world_size);
  LF_CHECK(w.world_size == 1 || w.launched, ConfigError,
           "WORLD_SIZE={} but no lf-train store (LF_RDZV_ADDR/LF_RDZV_PORT): run workers through `lf-train launch`",
           w.world_size);
  return w;
}

std::unique_ptr<Communicator> make_default_communicator(const WorldInfo& world, bool on_gpu, double timeout_s) {
  if (world.world_size == 1) return nullptr;
  CommOptions o;
  o.rank = world.rank;
  o.world_size = world.world_size;
  o.key_prefix = fmt::format("comm/g{}", world.generation);
  o.timeout_s = timeout_s;
  const bool check = collective_check_requested();  // a bad value fails before any connection
  std::unique_ptr<Communicator> comm;
  if (on_gpu) {
#if LF_HAVE_NCCL
    comm = make_nccl_communicator(o);
#else
    LF_THROW(ConfigError, "this lf-worker was built without NCCL (LF_WITH_CUDA=OFF): cannot train on GPUs");
#endif
  } else {
    comm = make_cpu_communicator(o);
  }
  return check ? with_collective_check(std::move(comm), o) : std::move(comm);
}

}  // namespace lf::comm
