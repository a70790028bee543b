#pragma once
// Node 0's rendezvous server as the agent hosts it: ServerOptions from the agent's options,
// bound to the address MASTER_ADDR resolves to here (lf/rendezvous/bind_address.h, or every
// address with --rdzv-bind-all), started, and said in one line (where it listens and why).
// Threading: the agent's io thread.
#include <boost/asio/io_context.hpp>

#include <memory>

#include "lf/agent/agent.h"
#include "lf/rendezvous/server.h"
#include "lf/ui/job_page.h"

namespace lf::agent {

// Throws NetworkError (the port is taken) or ConfigError (MASTER_ADDR is no address here).
std::unique_ptr<rdzv::RendezvousServer> start_hosted_server(boost::asio::io_context& io, const AgentOptions& o,
                                                            rdzv::RendezvousServer::FinishedHandler on_finished);

// The job's live page over the hosted server (--ui-port), started and its URL logged.
std::unique_ptr<ui::JobPage> start_hosted_page(boost::asio::io_context& io, const AgentOptions& o,
                                               const rdzv::RendezvousServer& server);

}  // namespace lf::agent
