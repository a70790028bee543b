// Membership (issue 29): once a job's round formed, a connection that is not one of its
// members is refused on its own, with the job named, and the members hear nothing of it;
// only members' failures stop the job. The real server on loopback, driven by blocking raw
// peers that speak the frames as an agent (or a stranger) would.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "lf/common/error.h"
#include "lf/rendezvous/bind_address.h"
#include "lf/rendezvous/messages.h"
#include "lf/rendezvous/server.h"
#include "rdzv_raw_peer.h"

using namespace lf::rdzv;
using lf::rdzv::test::RawPeer;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

JoinMsg join(int64_t rank, const std::string& hash = "cfg", int64_t nodes = 2, int64_t max_nodes = 0) {
  JoinMsg j;
  j.job_id = "job";
  j.token = "tok";
  j.node_rank = rank;
  j.hostname = "host" + std::to_string(rank);
  j.version = "v";
  j.config_hash = hash;
  j.pid = 100 + rank;
  j.min_nodes = nodes;
  j.max_nodes = max_nodes ? max_nodes : nodes;
  j.config_items = {"config=" + hash};
  return j;
}

class Membership : public ::testing::Test {
 protected:
  void start(int64_t min_nodes = 2, int64_t max_nodes = 2, double hello_timeout_s = 5, double heartbeat_timeout_s = 60) {
    ServerOptions o;
    o.job_id = "job";
    o.token = "tok";
    o.version = "v";
    o.min_nodes = min_nodes;
    o.max_nodes = max_nodes;
    o.last_call_s = 0.2;
    o.heartbeat_interval_s = 0.2;
    o.heartbeat_timeout_s = heartbeat_timeout_s;
    o.hello_timeout_s = hello_timeout_s;
    o.advertised_addr = "127.0.0.1";
    server_ = std::make_unique<RendezvousServer>(io_, o);
    server_->start([this](int code, const std::string&) { finished_code_ = code; });
    port_ = server_->port();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    io_.stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  // Two members with their layouts.
  void form(RawPeer& a, RawPeer& b) {
    a.send(join(0));
    b.send(join(1));
    ASSERT_TRUE(a.expect<LayoutMsg>());
    ASSERT_TRUE(b.expect<LayoutMsg>());
  }
  // The members heard nothing but heartbeats for a while: no Abort, no Refused.
  static void untouched(RawPeer& a, RawPeer& b) {
    EXPECT_FALSE(a.next(800ms).has_value()) << "a member was told something";
    EXPECT_FALSE(b.next(100ms).has_value()) << "a member was told something";
  }
  std::string refusal(RawPeer& p) {
    auto r = p.expect<RefusedMsg>();
    return r ? r->reason : std::string("<no Refused>");
  }

  boost::asio::io_context io_;
  std::unique_ptr<RendezvousServer> server_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<int> finished_code_{-1};
};

}  // namespace

TEST_F(Membership, ServerListensOnLoopbackUnlessTold) {
  start();
  EXPECT_EQ(server_->bound_address(), "127.0.0.1");
}

TEST_F(Membership, SurplusNodeIsRefusedAloneOnceTheJobFormed) {
  start();
  RawPeer a(port_), b(port_), c(port_);
  form(a, b);
  c.send(join(-1));
  const std::string why = refusal(c);
  EXPECT_NE(why.find("join refused by job 'job' at 127.0.0.1:"), std::string::npos) << why;
  EXPECT_NE(why.find("the job is full"), std::string::npos) << why;
  untouched(a, b);
  EXPECT_EQ(finished_code_, -1);
}

TEST_F(Membership, OtherConfigIsRefusedAloneNamingTheKeys) {
  start();
  RawPeer a(port_), b(port_), c(port_);
  form(a, b);
  c.send(join(-1, "other"));
  const std::string why = refusal(c);
  EXPECT_NE(why.find("command/config mismatch"), std::string::npos) << why;
  EXPECT_NE(why.find("join refused by job 'job'"), std::string::npos) << why;
  untouched(a, b);
}

TEST_F(Membership, OtherNnodesIsRefusedAlone) {
  start();
  RawPeer a(port_), b(port_), c(port_);
  form(a, b);
  c.send(join(-1, "cfg", 1));
  EXPECT_NE(refusal(c).find("nnodes mismatch"), std::string::npos);
  untouched(a, b);
}

TEST_F(Membership, TakenNodeRankIsRefusedAloneWithARetryHint) {
  start();
  RawPeer a(port_), b(port_), c(port_);
  form(a, b);
  c.send(join(1));
  auto r = c.expect<RefusedMsg>();
  ASSERT_TRUE(r);
  EXPECT_NE(r->reason.find("node rank 1 is held by a live agent"), std::string::npos) << r->reason;
  EXPECT_NE(r->reason.find("job 'job'"), std::string::npos) << r->reason;
  EXPECT_GT(r->retry_after_ms, 0);  // a replacement may retry while the holder dies
  untouched(a, b);
}

TEST_F(Membership, WrongTokenLearnsNothingAboutTheJob) {
  start();
  RawPeer a(port_), b(port_), c(port_);
  form(a, b);
  JoinMsg j = join(-1);
  j.token = "wrong";
  c.send(j);
  const std::string why = refusal(c);
  EXPECT_NE(why.find("authentication failed"), std::string::npos) << why;
  EXPECT_EQ(why.find("job 'job'"), std::string::npos) << why;
  EXPECT_EQ(why.find("host0"), std::string::npos) << why;
  untouched(a, b);
}

TEST_F(Membership, GarbageGetsARefusedFrameAndChangesNothing) {
  start();
  RawPeer a(port_), b(port_), c(port_);
  form(a, b);
  c.send_bytes("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string why = refusal(c);
  EXPECT_NE(why.find("not a valid lf-train rendezvous frame"), std::string::npos) << why;
  untouched(a, b);
}

TEST_F(Membership, SlowLorisIsRefusedAtTheHelloTimeout) {
  start(2, 2, /*hello_timeout_s=*/0.5);
  RawPeer a(port_), b(port_), c(port_);
  form(a, b);
  // Half a frame header, then nothing more: holds a descriptor and never says Join.
  c.send_bytes(encode_message(join(-1)).substr(0, 5));
  const std::string why = refusal(c);
  EXPECT_NE(why.find("no complete Join or StoreHello within 0.5 s"), std::string::npos) << why;
  untouched(a, b);
}

TEST_F(Membership, ParkedJoinerThatFailsLeavesAndTheJobRunsOn) {
  start(1, 3);
  RawPeer a(port_), parked(port_);
  a.send(join(-1, "cfg", 1, 3));
  ASSERT_TRUE(a.expect<LayoutMsg>(3000ms));
  parked.send(join(-1, "cfg", 1, 3));
  ASSERT_FALSE(parked.next(300ms).has_value());  // parked for the next round
  FailureMsg f;
  f.restartable = false;
  f.message = "agent interrupted by Interrupt";
  parked.send(f);
  EXPECT_FALSE(a.next(800ms).has_value()) << "the member was aborted by a non-member's failure";
  EXPECT_EQ(finished_code_, -1);
}

TEST_F(Membership, BeforeTheJobFormsAMismatchStillFailsEveryNode) {
  start();
  RawPeer a(port_), b(port_);
  a.send(join(0));
  b.send(join(1, "other"));
  EXPECT_NE(refusal(a).find("command/config mismatch"), std::string::npos);
  EXPECT_NE(refusal(b).find("command/config mismatch"), std::string::npos);
}

TEST_F(Membership, AMemberThatStopsHeartbeatingIsReportedAsMissedHeartbeats) {
  start(2, 2, 5, /*heartbeat_timeout_s=*/1);
  RawPeer a(port_), b(port_);
  form(a, b);
  b.stop_heartbeats();  // as a SIGSTOPped agent: its socket stays open, it says nothing
  auto abort = a.expect<AbortMsg>(8000ms);
  ASSERT_TRUE(abort);
  EXPECT_NE(abort->reason.find("missed heartbeats"), std::string::npos) << abort->reason;
  EXPECT_EQ(abort->reason.find(": closed"), std::string::npos) << abort->reason;
}

TEST(BindAddress, MasterAddrDecidesWhereTheServerListens) {
  EXPECT_EQ(choose_bind_address("127.0.0.1", 2, false).address, "127.0.0.1");
  EXPECT_EQ(choose_bind_address("localhost", 2, false).address.rfind("127.", 0) == 0 ||
                choose_bind_address("localhost", 2, false).address == "::1",
            true);
  const auto all = choose_bind_address("127.0.0.1", 2, true);
  EXPECT_EQ(all.address, "0.0.0.0");
  EXPECT_NE(all.why.find("--rdzv-bind-all"), std::string::npos);
  // TEST-NET-1 (RFC 5737): never an address of this host.
  EXPECT_THROW(choose_bind_address("192.0.2.7", 2, false), lf::ConfigError);
}
