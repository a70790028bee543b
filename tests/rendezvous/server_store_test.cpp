// The real server on loopback, driven by the real blocking StoreClient.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "lf/common/error.h"
#include "lf/rendezvous/server.h"
#include "lf/rendezvous/store_client.h"

using namespace lf::rdzv;
using namespace std::chrono_literals;

namespace {

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.bind_host = "127.0.0.1";
    o.job_id = "job";
    o.token = "tok";
    o.max_nodes = 2;
    server_ = std::make_unique<RendezvousServer>(io_, o);
    server_->start([](int, const std::string&) {});
    port_ = server_->port();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    io_.stop();
    thread_.join();
    server_.reset();
  }
  StoreClient client() { return StoreClient("127.0.0.1", port_, "job", "tok", 5s); }

  boost::asio::io_context io_;
  std::unique_ptr<RendezvousServer> server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_F(ServerFixture, StoreOperations) {
  auto c = client();
  c.set("k", "v");
  EXPECT_EQ(c.get("k").value(), "v");
  EXPECT_FALSE(c.get("missing"));
  EXPECT_EQ(c.add("n", 5), 5);
  EXPECT_EQ(c.add("n", 2), 7);
  EXPECT_EQ(c.compare_set("cas", "", "a"), "a");
  EXPECT_EQ(c.compare_set("cas", "b", "c"), "a");
  EXPECT_TRUE(c.erase("k"));
  EXPECT_FALSE(c.erase("k"));
  std::string big(1 << 20, 'z');  // NCCL ids are small; checkpoints manifests may not be
  c.set("big", big);
  EXPECT_EQ(c.get("big").value().size(), big.size());
}

TEST_F(ServerFixture, WaitBlocksUntilAnotherClientSets) {
  auto waiter = client();
  std::thread setter([this] {
    std::this_thread::sleep_for(100ms);
    auto c = client();
    c.set("nccl_id/0", "bytes");
  });
  auto t0 = std::chrono::steady_clock::now();
  waiter.wait({"nccl_id/0"}, 5s);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 80ms);
  setter.join();
}

TEST_F(ServerFixture, WaitTimesOutNamingTheKeys) {
  auto c = client();
  try {
    c.wait({"never"}, 200ms);
    FAIL();
  } catch (const lf::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos);
  }
  c.set("after", "ok");  // the connection is still usable
  EXPECT_EQ(c.get("after").value(), "ok");
}

TEST_F(ServerFixture, BarrierReleasesAllParticipantsTogether) {
  std::atomic<int> passed{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      auto c = client();
      c.barrier("b0", 4, 5s);
      ++passed;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(passed, 4);
  auto c = client();
  EXPECT_THROW(c.barrier("b1", 2, 200ms), lf::TimeoutError);
}

TEST_F(ServerFixture, WrongTokenIsRefusedWithoutDetails) {
  StoreClient bad("127.0.0.1", port_, "job", "wrong", 5s);
  try {
    bad.set("k", "v");
    FAIL();
  } catch (const lf::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("authentication failed"), std::string::npos) << what;
    EXPECT_EQ(what.find("tok"), std::string::npos) << what;  // never echo the secret
  }
}

TEST_F(ServerFixture, PortInUseIsAClearError) {
  ServerOptions o;
  o.bind_host = "127.0.0.1";
  o.port = port_;
  boost::asio::io_context io;
  RendezvousServer second(io, o);
  try {
    second.start([](int, const std::string&) {});
    FAIL();
  } catch (const lf::NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
  }
}

TEST(StoreClientNoServer, UnreachableNamesTheEndpoint) {
  try {
    StoreClient c("127.0.0.1", 1, "job", "tok", 300ms);
    FAIL();
  } catch (const lf::NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
}

// A store whose host drops every packet (a firewall, a host that is down): the connect
// timeout bounds the wait, where a plain connect() would block for the kernel's ~2 minutes
// of SYN retries. In a child process with a network namespace of its own (root): the store's
// address is a neighbour with a MAC nobody has, so SYNs leave and nothing comes back.
TEST(StoreClientNoServer, ConnectTimeoutBoundsAHostThatNeverAnswers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(60);  // a hang fails the test instead of blocking it
    if (::unshare(CLONE_NEWNET) != 0 ||
        std::system("ip link add lfa type veth peer name lfb && ip link set lfa up && ip link set lfb up && "
                    "ip addr add 10.77.0.1/24 dev lfa && "
                    "ip neigh add 10.77.0.2 lladdr 02:00:00:00:00:99 dev lfa nud permanent") != 0)
      ::_exit(77);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      lf::rdzv::StoreClient c("10.77.0.2", 29500, "none", "", std::chrono::milliseconds(1500));
      ::_exit(2);  // connected to nothing?
    } catch (const lf::NetworkError&) {
    }
    ::_exit(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20) ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung (alarm) or crashed";
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot make a network namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: connected; 3: the connect timeout did not bound the wait";
}
