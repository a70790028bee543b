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
  w.i64(m.base_world_size);
}
void get(WireReader& r, LayoutMsg& m) {
  m.node_rank = r.i64(); m.nnodes = r.i64(); m.rank_base = r.i64(); m.world_size = r.i64(); m.nproc = r.i64();
  m.generation = r.i64(); m.max_restarts = r.i64(); m.worker_master_addr = r.str(); m.worker_master_port = r.i64();
  m.base_world_size = r.i64();
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
                                  "Stopped", "Done", "Finished", "StoreHello", "StoreRequest", "StoreReply", "Waiting"};
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
