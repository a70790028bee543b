#include "lf/rendezvous/store_service.h"

#include <boost/asio/steady_timer.hpp>

#include <optional>

#include "lf/common/error.h"
#include "lf/rendezvous/connection.h"

namespace lf::rdzv {

namespace asio = boost::asio;

struct StoreService::PendingWait {
  explicit PendingWait(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  KvStore::WaiterId waiter = 0;
  bool finished = false;
  std::optional<std::multimap<uint64_t, std::shared_ptr<PendingWait>>::iterator> entry;
};

void StoreService::handle(const std::shared_ptr<Connection>& conn, uint64_t peer_id, StoreRequestMsg req) {
  StoreReplyMsg reply;
  reply.request_id = req.request_id;
  auto need_key = [&] {
    LF_CHECK(!req.keys.empty(), ProtocolError, "store request without a key");
    return req.keys[0];
  };
  try {
    switch (req.op) {
      case StoreOp::kSet:
        store_.set(need_key(), std::move(req.value));
        break;
      case StoreOp::kGet: {
        auto v = store_.get(need_key());
        if (v) reply.value = std::move(*v);
        else reply.status = StoreStatus::kNotFound;
        break;
      }
      case StoreOp::kAdd:
        reply.number = store_.add(need_key(), req.number);
        break;
      case StoreOp::kCompareSet:
        reply.value = store_.compare_set(need_key(), req.expected, std::move(req.value));
        break;
      case StoreOp::kDelete:
        if (!store_.erase(need_key())) reply.status = StoreStatus::kNotFound;
        break;
      case StoreOp::kWait:
        return wait_then_reply(conn, peer_id, req, false, 0);
      case StoreOp::kBarrier: {
        // Arrive, then wait for the counter to reach the participant count.
        store_.add(need_key(), 1);
        return wait_then_reply(conn, peer_id, req, true, req.number);
      }
      case StoreOp::kNumOps:
        break;
    }
  } catch (const Error& e) {
    reply.status = StoreStatus::kError;
    reply.value = e.what();
  }
  conn->send(reply);
}

void StoreService::wait_then_reply(const std::shared_ptr<Connection>& conn, uint64_t peer_id,
                                   const StoreRequestMsg& req, bool counter_wait, int64_t target) {
  auto pending = std::make_shared<PendingWait>(io_);
  std::weak_ptr<Connection> weak_conn = conn;
  uint64_t request_id = req.request_id;
  auto reply = [weak_conn, request_id](StoreStatus status) {
    if (auto c = weak_conn.lock()) {
      StoreReplyMsg r;
      r.request_id = request_id;
      r.status = status;
      c->send(r);
    }
  };
  // A finished wait leaves pending_ at once, so a long job's store doesn't grow.
  auto finish = [this, pending] {
    pending->finished = true;
    if (pending->entry) pending_.erase(*pending->entry);
    pending->entry.reset();
  };
  auto ready = [pending, reply, finish] {
    if (pending->finished) return;
    finish();
    pending->timer.cancel();
    reply(StoreStatus::kOk);
  };
  pending->waiter = counter_wait ? store_.wait_counter(req.keys.at(0), target, ready) : store_.wait(req.keys, ready);
  if (pending->finished) return;
  pending->entry = pending_.emplace(peer_id, pending);
  pending->timer.expires_after(std::chrono::milliseconds(std::max<int64_t>(req.timeout_ms, 0)));
  pending->timer.async_wait([this, pending, reply, finish](boost::system::error_code ec) {
    if (ec || pending->finished) return;
    finish();
    store_.cancel(pending->waiter);
    reply(StoreStatus::kTimeout);
  });
}

void StoreService::drop(uint64_t peer_id) {
  auto [b, e] = pending_.equal_range(peer_id);
  for (auto it = b; it != e; ++it) {
    auto& p = it->second;
    if (!p->finished) {
      p->finished = true;
      p->entry.reset();
      p->timer.cancel();
      store_.cancel(p->waiter);
    }
  }
  pending_.erase(b, e);
}

}  // namespace lf::rdzv
