#include "lf/rendezvous/messages.h"

#include "lf/common/error.h"
#include "lf/rendezvous/wire.h"

namespace lf::rdzv {

namespace {

// One function per direction and message keeps encode and decode side by side.
void put(WireWriter& w, const JoinMsg& m) {
  w.str(m.job_id); w.str(m.token); w.i64(m.node_rank); w.i64(m.nproc); w.str(m.hostname);
  w.str(m.version); w.str(m.config_hash); w.i64(m.worker_store_port); w.i64(m.pid); w.i64(m.min_nodes);
  w.i64(m.max_nodes); w.str_list(m.config_items);
}
void get(WireReader& r, JoinMsg& m) {
  m.job_id = r.str(); m.token = r.str(); m.node_rank = r.i64(); m.nproc = r.i64(); m.hostname = r.str();
  m.version = r.str(); m.config_hash = r.str(); m.worker_store_port = r.i64(); m.pid = r.i64(); m.min_nodes = r.i64();
  m.max_nodes = r.i64(); m.config_items = r.str_list();
}
void put(WireWriter& w, const LayoutMsg& m) {
  w.i64(m.node_rank); w.i64(m.nnodes); w.i64(m.rank_base); w.i64(m.world_size); w.i64(m.nproc);
  w.i64(m.generation); w.i64(m.max_restarts); w.str(m.worker_master_addr); w.i64(m.worker_master_port);
  w.i64(m.base_world_size); w.i64(m.status_interval_ms);
}
void get(WireReader& r, LayoutMsg& m) {
  m.node_rank = r.i64(); m.nnodes = r.i64(); m.rank_base = r.i64(); m.world_size = r.i64(); m.nproc = r.i64();
  m.generation = r.i64(); m.max_restarts = r.i64(); m.worker_master_addr = r.str(); m.worker_master_port = r.i64();
  m.base_world_size = r.i64(); m.status_interval_ms = r.i64();
}
void put(WireWriter& w, const RefusedMsg& m) { w.str(m.reason); w.i64(m.retry_after_ms); }
void get(WireReader& r, RefusedMsg& m) { m.reason = r.str(); m.retry_after_ms = r.i64(); }
void put(WireWriter& w, const HeartbeatMsg& m) { w.i64(m.generation); }
void get(WireReader& r, HeartbeatMsg& m) { m.generation = r.i64(); }
void put(WireWriter& w, const FailureMsg& m) {
  w.i64(m.generation); w.i64(m.node_rank); w.i64(m.global_rank); w.i64(m.exit_code); w.i64(m.signal);
  w.boolean(m.restartable); w.str(m.message); w.i64(m.exit_as);
}
void get(WireReader& r, FailureMsg& m) {
  m.generation = r.i64(); m.node_rank = r.i64(); m.global_rank = r.i64(); m.exit_code = r.i64();
  m.signal = r.i64(); m.restartable = r.boolean(); m.message = r.str(); m.exit_as = r.i64();
}
void put(WireWriter& w, const AbortMsg& m) {
  w.i64(m.generation); w.boolean(m.restart); w.i64(m.failed_node); w.str(m.reason); w.i64(m.exit_as);
}
void get(WireReader& r, AbortMsg& m) {
  m.generation = r.i64(); m.restart = r.boolean(); m.failed_node = r.i64(); m.reason = r.str(); m.exit_as = r.i64();
}
void put(WireWriter& w, const StoppedMsg& m) { w.i64(m.generation); w.i64(m.worker_store_port); }
void get(WireReader& r, StoppedMsg& m) { m.generation = r.i64(); m.worker_store_port = r.i64(); }
void put(WireWriter& w, const DoneMsg& m) { w.i64(m.generation); }
void get(WireReader& r, DoneMsg& m) { m.generation = r.i64(); }
void put(WireWriter&, const FinishedMsg&) {}
void get(WireReader&, FinishedMsg&) {}
void put(WireWriter& w, const StoreHelloMsg& m) { w.str(m.job_id); w.str(m.token); }
void get(WireReader& r, StoreHelloMsg& m) { m.job_id = r.str(); m.token = r.str(); }
void put(WireWriter& w, const StoreRequestMsg& m) {
  w.u64(m.request_id); w.u8(static_cast<uint8_t>(m.op)); w.str_list(m.keys); w.str(m.value);
  w.str(m.expected); w.i64(m.number); w.i64(m.timeout_ms);
}
void get(WireReader& r, StoreRequestMsg& m) {
  m.request_id = r.u64();
  uint8_t op = r.u8();
  LF_CHECK(op < static_cast<uint8_t>(StoreOp::kNumOps), ProtocolError, "unknown store op {}", op);
  m.op = static_cast<StoreOp>(op);
  m.keys = r.str_list(); m.value = r.str(); m.expected = r.str(); m.number = r.i64(); m.timeout_ms = r.i64();
}
void put(WireWriter& w, const StoreReplyMsg& m) {
  w.u64(m.request_id); w.u8(static_cast<uint8_t>(m.status)); w.str(m.value); w.i64(m.number);
}
void get(WireReader& r, StoreReplyMsg& m) {
  m.request_id = r.u64();
  uint8_t st = r.u8();
  LF_CHECK(st < static_cast<uint8_t>(StoreStatus::kNumStatus), ProtocolError, "unknown store status {}", st);
  m.status = static_cast<StoreStatus>(st);
  m.value = r.str(); m.number = r.i64();
}
void put(WireWriter& w, const WaitingMsg& m) { w.str(m.text); }
void get(WireReader& r, WaitingMsg& m) { m.text = r.str(); }

// Node status: lists of small records, each element at least this many bytes on the wire
// (a hostile count is refused before allocation: WireReader::count).
constexpr size_t kMinRank = 8 * 3 + 3 + 4 + 8 + 16 + 4 + 1 + 16 + 8 + 4;
constexpr size_t kMinGpu = 8 + 4 + 4 + 5 * 8;
constexpr size_t kMinPoint = 8 + 4 + 4;
constexpr size_t kMinLine = 8 + 1 + 4;

void put(WireWriter& w, const RankStatus& m) {
  w.i64(m.rank); w.i64(m.local_rank); w.i64(m.pid); w.boolean(m.alive); w.boolean(m.heard); w.boolean(m.progress);
  w.str(m.phase); w.i64(m.step); w.f64(m.since_beat_s); w.f64(m.since_progress_s); w.str(m.metrics_json);
  w.boolean(m.exited); w.i64(m.exit_code); w.i64(m.signal); w.i64(m.gpu); w.str(m.last_line);
}
void get(WireReader& r, RankStatus& m) {
  m.rank = r.i64(); m.local_rank = r.i64(); m.pid = r.i64(); m.alive = r.boolean(); m.heard = r.boolean();
  m.progress = r.boolean(); m.phase = r.str(); m.step = r.i64(); m.since_beat_s = r.f64(); m.since_progress_s = r.f64();
  m.metrics_json = r.str(); m.exited = r.boolean(); m.exit_code = r.i64(); m.signal = r.i64(); m.gpu = r.i64();
  m.last_line = r.str();
}
void put(WireWriter& w, const GpuStatus& m) {
  w.i64(m.index); w.str(m.name); w.str(m.uuid); w.f64(m.utilization); w.f64(m.memory_used_bytes);
  w.f64(m.memory_total_bytes); w.f64(m.temperature_celsius); w.f64(m.power_watts);
}
void get(WireReader& r, GpuStatus& m) {
  m.index = r.i64(); m.name = r.str(); m.uuid = r.str(); m.utilization = r.f64(); m.memory_used_bytes = r.f64();
  m.memory_total_bytes = r.f64(); m.temperature_celsius = r.f64(); m.power_watts = r.f64();
}
void put(WireWriter& w, const StepPoint& m) { w.i64(m.step); w.str(m.phase); w.str(m.metrics_json); }
void get(WireReader& r, StepPoint& m) { m.step = r.i64(); m.phase = r.str(); m.metrics_json = r.str(); }
void put(WireWriter& w, const LogLine& m) { w.i64(m.rank); w.boolean(m.err); w.str(m.text); }
void get(WireReader& r, LogLine& m) { m.rank = r.i64(); m.err = r.boolean(); m.text = r.str(); }

template <typename T>
void put_list(WireWriter& w, const std::vector<T>& v) {
  w.count(v.size());
  for (const auto& e : v) put(w, e);
}
template <typename T>
std::vector<T> get_list(WireReader& r, size_t min_bytes_each) {
  const uint32_t n = r.count(min_bytes_each);
  std::vector<T> v(n);
  for (auto& e : v) get(r, e);
  return v;
}

void put(WireWriter& w, const NodeStatusMsg& m) {
  w.i64(m.generation); put_list(w, m.ranks); put_list(w, m.gpus); w.str(m.gpu_note); put_list(w, m.points);
  put_list(w, m.lines);
}
void get(WireReader& r, NodeStatusMsg& m) {
  m.generation = r.i64(); m.ranks = get_list<RankStatus>(r, kMinRank); m.gpus = get_list<GpuStatus>(r, kMinGpu);
  m.gpu_note = r.str(); m.points = get_list<StepPoint>(r, kMinPoint); m.lines = get_list<LogLine>(r, kMinLine);
}

template <size_t I>
Message decode_alternative(WireReader& r) {
  std::variant_alternative_t<I, Message> m;
  get(r, m);
  return m;
}

template <size_t... I>
Message decode_index(size_t index, WireReader& r, std::index_sequence<I...>) {
  using Decoder = Message (*)(WireReader&);
  static constexpr Decoder kDecoders[] = {&decode_alternative<I>...};
  return kDecoders[index](r);
}

constexpr const char* kNames[] = {"Join", "Layout", "Refused", "Heartbeat", "Failure", "Abort",
                                  "Stopped", "Done", "Finished", "StoreHello", "StoreRequest", "StoreReply", "Waiting",
                                  "NodeStatus"};
static_assert(std::size(kNames) == std::variant_size_v<Message>);

}  // namespace

std::string encode_message(const Message& m) {
  WireWriter w;
  std::visit([&](const auto& alt) { put(w, alt); }, m);
  return encode_frame(static_cast<uint16_t>(m.index() + 1), w.data());
}

Message decode_message(const Frame& frame) {
  constexpr size_t kCount = std::variant_size_v<Message>;
  LF_CHECK(frame.type >= 1 && frame.type <= kCount, ProtocolError, "unknown message type {}", frame.type);
  WireReader r(frame.payload);
  Message m = decode_index(frame.type - 1, r, std::make_index_sequence<kCount>{});
  r.expect_end();
  return m;
}

const char* message_name(const Message& m) { return kNames[m.index()]; }

}  // namespace lf::rdzv
