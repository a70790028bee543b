#pragma once
// Serves StoreRequest messages from any authenticated connection against the
// server's KvStore, including blocking waits and barriers with deadlines.
// Threading: the server's io thread only.
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <map>
#include <memory>

#include "lf/rendezvous/kv_store.h"
#include "lf/rendezvous/messages.h"

namespace lf::rdzv {

class Connection;

class StoreService {
 public:
  StoreService(boost::asio::io_context& io, KvStore& store) : io_(io), store_(store) {}
  void handle(const std::shared_ptr<Connection>& conn, uint64_t peer_id, StoreRequestMsg req);
  // The peer's connection closed: forget its pending waits.
  void drop(uint64_t peer_id);

 private:
  struct PendingWait;
  void wait_then_reply(const std::shared_ptr<Connection>& conn, uint64_t peer_id, const StoreRequestMsg& req,
                       bool counter_wait, int64_t target);

  boost::asio::io_context& io_;
  KvStore& store_;
  std::multimap<uint64_t, std::shared_ptr<PendingWait>> pending_;  // peer id -> waits
};

}  // namespace lf::rdzv
