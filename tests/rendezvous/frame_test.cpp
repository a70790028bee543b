#include <gtest/gtest.h>

#include <random>

#include "lf/common/error.h"
#include "lf/rendezvous/messages.h"

using namespace lf::rdzv;

namespace {

JoinMsg sample_join() {
  JoinMsg j;
  j.job_id = "job";
  j.token = "secret";
  j.node_rank = 3;
  j.nproc = 8;
  j.hostname = "node-3";
  j.version = "0.1.0";
  j.config_hash = "abc";
  j.worker_store_port = 12345;
  j.pid = 777;
  j.config_items = {"seed=1", "lora_rank=8"};
  return j;
}

NodeStatusMsg sample_status() {
  NodeStatusMsg s;
  s.generation = 2;
  RankStatus r;
  r.rank = 9; r.local_rank = 1; r.pid = 4242; r.alive = false; r.heard = true; r.progress = true; r.phase = "training";
  r.step = 17; r.since_beat_s = 0.25; r.since_progress_s = 1.5; r.metrics_json = R"({"loss":1.5})"; r.exited = true;
  r.exit_code = 0; r.signal = 9; r.gpu = 3; r.last_line = "step 17";
  s.ranks = {r, RankStatus{}};
  GpuStatus g;
  g.index = 3; g.name = "NVIDIA H200"; g.uuid = "GPU-1"; g.utilization = 0.97; g.memory_used_bytes = 8e10;
  g.memory_total_bytes = 1.4e11; g.temperature_celsius = 61; g.power_watts = -1;
  s.gpus = {g};
  s.gpu_note = "";
  s.points = {{16, "training", R"({"loss":1.6})"}, {17, "saving", "{}"}};
  s.lines = {{9, false, "hello"}, {9, true, std::string("bin\0ary", 7)}};
  return s;
}

std::vector<Message> every_message() {
  LayoutMsg l;
  l.node_rank = 1; l.nnodes = 2; l.rank_base = 8; l.world_size = 16; l.nproc = 8; l.generation = 2;
  l.max_restarts = 3; l.worker_master_addr = "10.0.0.1"; l.worker_master_port = 29501;
  l.base_world_size = 24;
  l.status_interval_ms = 1000;
  StoreRequestMsg r;
  r.request_id = 9; r.op = StoreOp::kCompareSet; r.keys = {"k1", "k2"}; r.value = std::string("v\0v", 3);
  r.expected = "e"; r.number = -5; r.timeout_ms = 1000;
  StoreReplyMsg rep;
  rep.request_id = 9; rep.status = StoreStatus::kTimeout; rep.value = "x"; rep.number = 42;
  return {sample_join(), l, RefusedMsg{"no"}, HeartbeatMsg{4},
          FailureMsg{1, 2, 3, 4, 9, false, "boom", 2}, AbortMsg{1, true, 0, "why", 2}, StoppedMsg{1, 5},
          DoneMsg{7}, FinishedMsg{}, StoreHelloMsg{"job", "tok"}, r, rep, WaitingMsg{"1 of 2 nodes joined"},
          sample_status()};
}

}  // namespace

TEST(Frame, EveryMessageRoundTripsByteIdentically) {
  for (const auto& m : every_message()) {
    std::string bytes = encode_message(m);
    FrameParser p;
    p.feed(bytes);
    auto f = p.next();
    ASSERT_TRUE(f) << message_name(m);
    Message back = decode_message(*f);
    EXPECT_EQ(back.index(), m.index());
    EXPECT_EQ(encode_message(back), bytes) << message_name(m);
    EXPECT_FALSE(p.next());
  }
}

TEST(Frame, ParsesAnyChunkingOfAStream) {
  std::string stream;
  auto msgs = every_message();
  for (const auto& m : msgs) stream += encode_message(m);
  std::mt19937 rng(1);
  for (int trial = 0; trial < 50; ++trial) {
    FrameParser p;
    size_t pos = 0, got = 0;
    while (pos < stream.size()) {
      size_t n = std::min<size_t>(1 + rng() % 17, stream.size() - pos);
      p.feed(std::string_view(stream).substr(pos, n));
      pos += n;
      while (auto f = p.next()) {
        EXPECT_EQ(decode_message(*f).index(), msgs[got].index());
        ++got;
      }
    }
    EXPECT_EQ(got, msgs.size());
  }
}

TEST(Frame, RejectsBadMagicForeignVersionAndOversize) {
  std::string good = encode_message(HeartbeatMsg{1});
  {
    std::string bad = good;
    bad[0] = 'X';
    FrameParser p;
    p.feed(bad);
    EXPECT_THROW(p.next(), lf::ProtocolError);
  }
  {
    std::string bad = good;
    bad[4] = 99;  // version
    FrameParser p;
    p.feed(bad);
    try {
      p.next();
      FAIL();
    } catch (const lf::ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find("version 99"), std::string::npos) << e.what();
    }
  }
  {
    FrameParser p(16);
    p.feed(encode_message(RefusedMsg{std::string(100, 'x')}));
    try {
      p.next();
      FAIL();
    } catch (const lf::ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find("exceeds the limit of 16"), std::string::npos) << e.what();
    }
  }
}

// Protocol 4 (issue 35's NodeStatus): a peer of protocol 3 is refused, both versions named, so an
// old lf-train on one node says what is wrong instead of misreading the frames.
TEST(Frame, APeerOfTheOldProtocolIsRefusedNamingBothVersions) {
  std::string old = encode_message(HeartbeatMsg{1});
  old[4] = 3;
  old[5] = 0;
  FrameParser p;
  p.feed(old);
  try {
    p.next();
    FAIL() << "a protocol-3 frame was read";
  } catch (const lf::ProtocolError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("protocol version 3, this lf-train speaks 4"), std::string::npos) << what;
    EXPECT_NE(what.find("run the same lf-train version on every node"), std::string::npos) << what;
  }
}

TEST(Frame, ANodeStatusRoundTripsItsValues) {
  const auto s = sample_status();
  FrameParser p;
  p.feed(encode_message(s));
  const auto back = std::get<NodeStatusMsg>(decode_message(*p.next()));
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.ranks[0].rank, 9);
  EXPECT_EQ(back.ranks[0].signal, 9);
  EXPECT_DOUBLE_EQ(back.ranks[0].since_beat_s, 0.25);
  EXPECT_EQ(back.ranks[0].metrics_json, R"({"loss":1.5})");
  ASSERT_EQ(back.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(back.gpus[0].utilization, 0.97);
  EXPECT_DOUBLE_EQ(back.gpus[0].power_watts, -1);
  ASSERT_EQ(back.points.size(), 2u);
  EXPECT_EQ(back.points[1].phase, "saving");
  ASSERT_EQ(back.lines.size(), 2u);
  EXPECT_TRUE(back.lines[1].err);
  EXPECT_EQ(back.lines[1].text, std::string("bin\0ary", 7));
}

TEST(Frame, ANodeStatusClaimingMoreRanksThanItsBytesIsRefusedBeforeAllocating) {
  std::string bytes = encode_message(NodeStatusMsg{});
  Frame f{static_cast<uint16_t>(Message(NodeStatusMsg{}).index() + 1), bytes.substr(kFrameHeaderSize)};
  // After the generation (8 bytes): the rank list's count.
  f.payload[8] = f.payload[9] = f.payload[10] = f.payload[11] = '\xff';
  try {
    decode_message(f);
    FAIL();
  } catch (const lf::ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("list of 4294967295 elements"), std::string::npos) << e.what();
  }
}

TEST(Frame, TruncatedOrPaddedPayloadIsAnErrorNotACrash) {
  std::string bytes = encode_message(sample_join());
  Frame f;
  f.type = 1;
  f.payload = bytes.substr(kFrameHeaderSize);
  for (size_t cut = 0; cut < f.payload.size(); ++cut) {
    Frame t{f.type, f.payload.substr(0, cut)};
    EXPECT_THROW(decode_message(t), lf::ProtocolError) << cut;
  }
  Frame padded{f.type, f.payload + "x"};
  EXPECT_THROW(decode_message(padded), lf::ProtocolError);
  Frame unknown{200, ""};
  EXPECT_THROW(decode_message(unknown), lf::ProtocolError);
}

TEST(Frame, HostileListCountDoesNotAllocate) {
  // A StoreRequest whose key list claims 2^32-1 entries in a few bytes.
  StoreRequestMsg req;
  std::string bytes = encode_message(req);
  Frame f{11, bytes.substr(kFrameHeaderSize)};
  size_t list_at = 8 + 1;  // after request_id and op
  f.payload[list_at] = f.payload[list_at + 1] = f.payload[list_at + 2] = f.payload[list_at + 3] = '\xff';
  EXPECT_THROW(decode_message(f), lf::ProtocolError);
}

TEST(Frame, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  int errors = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    // Half the time behind a valid header, so the payload decoders get exercised too.
    if (i % 2) junk = encode_frame(static_cast<uint16_t>(1 + rng() % std::variant_size_v<Message>), junk);
    FrameParser p(1024);
    p.feed(junk);
    try {
      while (auto f = p.next()) decode_message(*f);
    } catch (const lf::ProtocolError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1000);
}
