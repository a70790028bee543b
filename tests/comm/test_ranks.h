#pragma once
// Ranks as threads for comm tests: a real rendezvous server (the store) on
// loopback and one communicator per thread. Rethrows the first rank's failure.
#include <boost/asio/io_context.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "lf/comm/communicator.h"
#include "lf/rendezvous/server.h"

namespace lf::comm::testing {

using MakeComm = std::function<std::unique_ptr<Communicator>(const CommOptions&)>;

// A real rendezvous server (the job's store) on loopback for the test's lifetime.
struct LoopbackStore {
  boost::asio::io_context io;
  std::unique_ptr<rdzv::RendezvousServer> server;
  std::thread io_thread;
  LoopbackStore() {
    rdzv::ServerOptions so;
    so.bind_host = "127.0.0.1";
    server = std::make_unique<rdzv::RendezvousServer>(io, so);
    server->start([](int, const std::string&) {});
    io_thread = std::thread([this] { io.run(); });
  }
  ~LoopbackStore() {
    io.stop();
    io_thread.join();
  }
  uint16_t port() const { return server->port(); }
};

inline void run_ranks(int world, const std::function<void(int, Communicator&)>& body,
                      const MakeComm& make = make_cpu_communicator,
                      const std::function<void(int)>& before = nullptr) {
  LoopbackStore store;
  std::vector<std::thread> ts;
  std::vector<std::exception_ptr> errors(world);
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        if (before) before(r);
        CommOptions o;
        o.rank = r;
        o.world_size = world;
        o.store_addr = "127.0.0.1";
        o.store_port = store.port();
        o.timeout_s = 30;
        auto comm = make(o);
        body(r, *comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : ts) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace lf::comm::testing
