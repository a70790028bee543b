#pragma once
// The rendezvous protocol's messages and their codec. Every message travels in
// one frame (frame.h) whose type is the variant index + 1. decode_message()
// throws ProtocolError on anything malformed; it never trusts a length.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "lf/rendezvous/frame.h"

namespace lf::rdzv {

// agent -> server: ask to be part of the job (a new job or the next generation).
struct JoinMsg {
  std::string job_id;
  std::string token;
  int64_t node_rank = -1;  // -1: assign by arrival
  int64_t nproc = 1;
  std::string hostname;
  std::string version;
  std::string config_hash;
  int64_t worker_store_port = 0;  // port the node's rank-0 worker will listen on (node 0 only)
  int64_t pid = 0;
  int64_t min_nodes = 1;  // the agent's NNODES: must match the server's
  int64_t max_nodes = 1;
  // The effective config as "key=value" items (or "command=..." for `launch`): when the
  // config hashes differ, the server names the keys that differ and both values.
  std::vector<std::string> config_items;
};

// server -> agent: the world of this generation.
struct LayoutMsg {
  int64_t node_rank = 0;
  int64_t nnodes = 0;
  int64_t rank_base = 0;  // global rank of this node's local rank 0
  int64_t world_size = 0;
  int64_t nproc = 0;
  int64_t generation = 0;  // == TORCHELASTIC_RESTART_COUNT
  int64_t max_restarts = 0;
  std::string worker_master_addr;  // empty: use the MASTER_ADDR the agent was given
  int64_t worker_master_port = 0;
  // Elastic jobs (--nnodes MIN:MAX): the world size of the job's first round, whose global
  // batch every later round keeps (LF_BASE_WORLD_SIZE); 0: a fixed-size job.
  int64_t base_world_size = 0;
  // > 0: send a NodeStatusMsg this often (node 0 serves the job's live page, --ui-port); 0: don't.
  int64_t status_interval_ms = 0;
};

// server -> agent: refused (wrong token, mismatch, timeout...). The server closes after it.
struct RefusedMsg {
  std::string reason;
  // > 0: the refusal may clear by itself (the rank's holder may be dying);
  // the agent may try again after this many ms, within the heartbeat timeout.
  int64_t retry_after_ms = 0;
};

struct HeartbeatMsg {
  int64_t generation = 0;
};

// agent -> server: a local worker failed (or the agent itself is going down).
struct FailureMsg {
  int64_t generation = 0;
  int64_t node_rank = 0;
  int64_t global_rank = -1;  // -1: not a worker (agent interrupted, heartbeat timeout...)
  int64_t exit_code = 0;
  int64_t signal = 0;
  bool restartable = true;  // false: the user interrupted, or a config/data error; never restart
  std::string message;
  int64_t exit_as = 0;  // != 0: the exit code every node ends with (kExitConfig for a config/data error)
};

// server -> agents: stop all workers of this generation; with restart, wait for the next layout.
struct AbortMsg {
  int64_t generation = 0;
  bool restart = false;
  int64_t failed_node = -1;
  std::string reason;
  int64_t exit_as = 0;  // != 0: exit with this code (the failure's exit_as) instead of kExitAborted
};

// agent -> server: all workers of the generation are stopped (restart barrier).
struct StoppedMsg {
  int64_t generation = 0;
  int64_t worker_store_port = 0;
};

// agent -> server: all local workers of the generation exited 0.
struct DoneMsg {
  int64_t generation = 0;
};

// server -> agents: every node is done; exit 0.
struct FinishedMsg {};

// worker/tool -> server: open a store-only connection.
struct StoreHelloMsg {
  std::string job_id;
  std::string token;
};

enum class StoreOp : uint8_t { kSet = 0, kGet, kAdd, kCompareSet, kWait, kBarrier, kDelete, kNumOps };

struct StoreRequestMsg {
  uint64_t request_id = 0;
  StoreOp op = StoreOp::kGet;
  std::vector<std::string> keys;  // kWait: all; others: keys[0]
  std::string value;              // kSet, kCompareSet (desired)
  std::string expected;           // kCompareSet
  int64_t number = 0;             // kAdd delta; kBarrier participant count
  int64_t timeout_ms = 0;         // kWait, kBarrier
};

enum class StoreStatus : uint8_t { kOk = 0, kNotFound, kTimeout, kError, kNumStatus };

struct StoreReplyMsg {
  uint64_t request_id = 0;
  StoreStatus status = StoreStatus::kOk;
  std::string value;
  int64_t number = 0;
};

// server -> joined agents, while a round waits for its nodes: who is waiting for whom.
struct WaitingMsg {
  std::string text;
};

// ---- node status (protocol 4): what node 0's live page shows of every node ----------------

// One local rank as its agent sees it.
struct RankStatus {
  int64_t rank = 0;  // global
  int64_t local_rank = 0;
  int64_t pid = -1;
  bool alive = false;
  bool heard = false;     // any heartbeat so far
  bool progress = false;  // any progress beat so far (phase, step, metrics_json are its last one's)
  std::string phase;
  int64_t step = 0;
  double since_beat_s = 0;      // at the time of sending
  double since_progress_s = 0;
  std::string metrics_json = "{}";  // the last progress beat's record (lf/common/progress_metrics.h)
  bool exited = false;              // the process ended in this generation: exit_code or signal
  int64_t exit_code = 0;
  int64_t signal = 0;
  int64_t gpu = -1;  // the NVML index of the rank's GPU; -1: none or unknown
  std::string last_line;  // its last output line
};

// One GPU of the node (lf/metrics/nvml.h's sample); a value below 0 is unknown.
struct GpuStatus {
  int64_t index = 0;
  std::string name, uuid;
  double utilization = -1;  // 0..1
  double memory_used_bytes = -1, memory_total_bytes = -1;
  double temperature_celsius = -1, power_watts = -1;
};

// A progress beat of global rank 0 (its step record: loss, learning rate, grad norm, ...), so
// node 0 draws every step's curve point, not one a status interval.
struct StepPoint {
  int64_t step = 0;
  std::string phase;
  std::string metrics_json = "{}";
};

// A line a rank wrote (stdout or stderr), as the agent relays it.
struct LogLine {
  int64_t rank = 0;
  bool err = false;
  std::string text;
};

// agent -> server, every LayoutMsg::status_interval_ms and at each worker exit: the node's
// ranks, GPUs, global rank 0's new progress beats and the output lines since the last one.
struct NodeStatusMsg {
  int64_t generation = 0;
  std::vector<RankStatus> ranks;
  std::vector<GpuStatus> gpus;
  std::string gpu_note;  // why `gpus` is empty ("no NVIDIA driver: ...")
  std::vector<StepPoint> points;
  std::vector<LogLine> lines;
};

using Message = std::variant<JoinMsg, LayoutMsg, RefusedMsg, HeartbeatMsg, FailureMsg, AbortMsg,
                             StoppedMsg, DoneMsg, FinishedMsg, StoreHelloMsg, StoreRequestMsg,
                             StoreReplyMsg, WaitingMsg, NodeStatusMsg>;

std::string encode_message(const Message& m);  // a whole frame
Message decode_message(const Frame& frame);
const char* message_name(const Message& m);

}  // namespace lf::rdzv
