#pragma once
// Node 0's rendezvous server as the agent hosts it: ServerOptions from the agent's options,
// bound to the address MASTER_ADDR resolves to here (lf/rendezvous/bind_address.h, or every
// address with --rdzv-bind-all), started, and said in one line (where it listens and why).
// Threading: the agent's io thread.
#include <boost/asio/io_context.hpp>

#include <memory>

#include "lf/agent/agent.h"
#include "lf/rendezvous/server.h"

namespace lf::agent {

// Throws NetworkError (the port is taken) or ConfigError (MASTER_ADDR is no address here).
std::unique_ptr<rdzv::RendezvousServer> start_hosted_server(boost::asio::io_context& io, const AgentOptions& o,
                                                            rdzv::RendezvousServer::FinishedHandler on_finished);

}  // namespace lf::agent
