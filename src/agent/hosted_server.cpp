#include "lf/agent/hosted_server.h"

#include <spdlog/spdlog.h>

#include "lf/common/version.h"
#include "lf/rendezvous/bind_address.h"

namespace lf::agent {

std::unique_ptr<rdzv::RendezvousServer> start_hosted_server(boost::asio::io_context& io, const AgentOptions& o,
                                                            rdzv::RendezvousServer::FinishedHandler on_finished) {
  const auto bind = rdzv::choose_bind_address(o.master_addr, o.max_nodes, o.rdzv_bind_all);
  rdzv::ServerOptions so;
  so.bind_host = bind.address;
  so.port = o.master_port;
  so.job_id = o.rdzv_id;
  so.token = o.token;
  so.version = kVersion;
  so.min_nodes = o.min_nodes;
  so.max_nodes = o.max_nodes;
  so.max_restarts = o.max_restarts;
  so.join_timeout_s = o.join_timeout_s;
  so.last_call_s = o.last_call_s;
  so.heartbeat_interval_s = o.heartbeat_interval_s;
  so.heartbeat_timeout_s = o.heartbeat_timeout_s;
  so.stop_timeout_s = o.stop_grace_s + 2 * o.heartbeat_timeout_s + 5;
  so.event_log_path = o.event_log;
  so.status_interval_s = o.status_interval_s;
  so.advertised_addr = o.master_addr;
  auto server = std::make_unique<rdzv::RendezvousServer>(io, so);
  server->start(std::move(on_finished));
  spdlog::info("rendezvous server listening on port {} of {} ({}; job '{}', {} node(s){})", server->port(),
               server->bound_address(), bind.why, o.rdzv_id, o.max_nodes, o.token.empty() ? "" : ", job token set");
  return server;
}

}  // namespace lf::agent
