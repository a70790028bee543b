#pragma once
// `lf-train doctor [CONFIG] [--all-nodes]`: the preflight the multi-node guides do by hand
// (nvidia-smi, df /dev/shm, ulimit, ip link, ibstat, nc -zv master 29500, touch on the
// shared disk ...), one check per line (report.h). lf-train never links CUDA: GPU facts come
// from dlopen (libnvidia-ml, libcuda, libnccl) or /proc and /sys. Each group of checks is a
// file of its own; run_node_checks runs them all for this node, run_all_nodes (all_nodes.cpp)
// then compares the nodes through a rendezvous of the doctors on MASTER_ADDR:MASTER_PORT.
// Blocking (a command, not the agent); every network wait has a deadline.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lf/config/train_config.h"
#include "lf/doctor/report.h"

namespace lf::doctor {

struct DoctorContext {
  // The job as the user's environment and flags describe it (the agent's reading of them).
  int64_t nnodes = 1;
  int64_t node_rank = -1;  // -1: unknown (by arrival)
  int64_t nproc = 1;
  bool nproc_given = false;  // NPROC_PER_NODE / --nproc-per-node set (else one per GPU)
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  std::string rdzv_id = "none";
  std::string token;
  // With CONFIG.
  std::optional<config::JobPlan> config;
  std::string config_path;
  std::string config_error;  // the config did not load: why
  // Where to look (tests point these elsewhere).
  std::string sys_root = "/sys", proc_root = "/proc", shm_path = "/dev/shm";
  std::string nvml_library = "libnvidia-ml.so.1", cuda_library = "libcuda.so.1", nccl_library = "libnccl.so.2";
  double connect_timeout_s = 3;  // one TCP probe
  double all_nodes_timeout_s = 60;  // --all-nodes: how long to wait for the other nodes
  uint16_t probe_port = 0;          // --all-nodes: the port each node listens on for the mesh check (0: any)
};

// What a node tells the others with --all-nodes (and prints for itself).
struct NodeFacts {
  std::string hostname;
  int gpu_count = 0;
  std::vector<std::string> gpu_models;
  std::string driver_version;  // "550.54.15"
  std::string cuda_version;    // the driver's CUDA: "12.4"
  std::string nccl_version;    // "2.21.5"
  int64_t nproc = 1;
  double free_gpu_memory_bytes = 0;  // the least free memory of the GPUs this node's workers use
};

// From the environment (NNODES, NODE_RANK, ... , LF_NVML_LIBRARY, LF_CUDA_LIBRARY,
// LF_NCCL_LIBRARY); the caller fills what its flags say.
DoctorContext context_from_env();

// Every check of this node, in order; fills facts for the cross-node comparison.
void run_node_checks(const DoctorContext& ctx, Report& report, NodeFacts& facts, bool all_nodes = false);

// The groups (one file each).
void check_gpus(const DoctorContext& ctx, Report& report, NodeFacts& facts);
void check_system(const DoctorContext& ctx, Report& report);
void check_nccl_network(const DoctorContext& ctx, Report& report);
void check_master(const DoctorContext& ctx, Report& report, bool all_nodes);
void check_config(const DoctorContext& ctx, Report& report, const NodeFacts& facts);

// --all-nodes: rendezvous of the doctors, then versions, GPU models, the TCP mesh, clock
// skew and a shared output_dir compared across nodes.
void run_all_nodes(const DoctorContext& ctx, Report& report, const NodeFacts& facts);

// True when `host` names an address of this machine (bind test).
bool is_local_address(const std::string& host);

}  // namespace lf::doctor
