#pragma once
// The rendezvous server: admits agents into a job (token, job id, version,
// nproc and config-hash checks), hands out the world layout per generation,
// watches heartbeats, turns any member's failure into an abort broadcast (and a
// restart round while restarts remain), and serves the job's key-value store.
// Once the job's first round formed, a connection that is not one of its members
// (another job's node, another config, a surplus node, a taken NODE_RANK, a wrong
// token, garbage, a silent socket) is refused on its own, with the job named, and
// the job runs on untouched.
// Threading: everything runs on the given io_context's thread.
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lf/rendezvous/job_record.h"

namespace lf::rdzv {

struct ServerOptions {
  // The address the agent resolved MASTER_ADDR to on node 0 (lf/agent/rdzv_bind.h);
  // "0.0.0.0" only when asked for (--rdzv-bind-all).
  std::string bind_host = "127.0.0.1";
  uint16_t port = 0;  // 0: pick a free one (tests)
  std::string job_id = "none";
  std::string token;  // LF_JOB_TOKEN; empty accepts only empty tokens
  std::string version;
  int64_t min_nodes = 1;
  int64_t max_nodes = 1;
  int64_t max_restarts = 0;
  double join_timeout_s = 300;
  double last_call_s = 5;  // elastic: wait this long for more nodes once min_nodes joined
  double heartbeat_interval_s = 0.5;
  double heartbeat_timeout_s = 3;
  double stop_timeout_s = 60;  // how long agents get to report their workers stopped
  uint32_t max_payload = 4u << 20;
  std::string event_log_path;  // JSON lines with timestamps; empty: none
  double status_interval_s = 10;  // while a round waits for nodes: who is waiting for whom, this often
  std::string advertised_addr;   // MASTER_ADDR as the nodes were told it (for those lines)
  // A connection must say Join or StoreHello within this, else it is refused and closed
  // (descriptors held by idle or half-sent connections would starve the real agents).
  double hello_timeout_s = 5;
  // > 0: every node sends its status (NodeStatusMsg) this often, for node 0's live page
  // (--ui-port); the server keeps it in its JobRecord. 0: nodes send none.
  double node_status_interval_s = 0;
};

class RendezvousServer {
 public:
  // Called once when the job is over: kExitOk (every node done), kExitAborted
  // (a failure with no restart left), kExitRendezvous (the rendezvous failed).
  using FinishedHandler = std::function<void(int exit_code, const std::string& reason)>;

  RendezvousServer(boost::asio::io_context& io, ServerOptions options);
  ~RendezvousServer();
  // Binds and starts accepting. Throws NetworkError naming the port when it is in use.
  void start(FinishedHandler on_finished);
  uint16_t port() const;
  // The IP address the acceptor is bound to (ServerOptions::bind_host).
  std::string bound_address() const;
  // The job as node 0's live page shows it (job_record.h); valid until the io thread runs on.
  JobView job_view() const;
  // Flushes what is queued to every connection, closes them, then calls done
  // (at once if nothing is queued, at the latest after timeout_s).
  void shutdown(double timeout_s, std::function<void()> done);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace lf::rdzv
