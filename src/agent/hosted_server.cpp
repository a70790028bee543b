#include "lf/agent/hosted_server.h"

#include <spdlog/spdlog.h>

#include "lf/common/version.h"
#include "lf/rendezvous/bind_address.h"
#include "lf/ui/live_source.h"

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
  so.node_status_interval_s = o.ui_port >= 0 ? o.ui_status_interval_s : 0;
  auto server = std::make_unique<rdzv::RendezvousServer>(io, so);
  server->start(std::move(on_finished));
  spdlog::info("rendezvous server listening on port {} of {} ({}; job '{}', {} node(s){})", server->port(),
               server->bound_address(), bind.why, o.rdzv_id, o.max_nodes, o.token.empty() ? "" : ", job token set");
  return server;
}

std::unique_ptr<ui::JobPage> start_hosted_page(boost::asio::io_context& io, const AgentOptions& o,
                                               const rdzv::RendezvousServer& server) {
  auto po = ui::PageOptions::from_env(static_cast<uint16_t>(o.ui_port));
  if (!o.ui_addr.empty()) po.bind_host = o.ui_addr;
  ui::LiveSourceOptions lo;
  lo.facts = o.ui_facts;
  lo.preview = o.ui_preview;
  lo.thresholds = metrics::HealthThresholds::from_env();
  auto page = std::make_unique<ui::JobPage>(io, po, ui::make_live_source(server, std::move(lo)));
  page->start();
  return page;
}

}  // namespace lf::agent
