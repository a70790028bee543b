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

inline void run_ranks(int world, const std::function<void(int, Communicator&)>& body,
                      const MakeComm& make = make_cpu_communicator,
                      const std::function<void(int)>& before = nullptr) {
  boost::asio::io_context io;
  rdzv::ServerOptions so;
  so.bind_host = "127.0.0.1";
  rdzv::RendezvousServer server(io, so);
  server.start([](int, const std::string&) {});
  std::thread io_thread([&] { io.run(); });
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
        o.store_port = server.port();
        o.timeout_s = 30;
        auto comm = make(o);
        body(r, *comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : ts) t.join();
  io.stop();
  io_thread.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace lf::comm::testing
