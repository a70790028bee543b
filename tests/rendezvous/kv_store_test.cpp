#include <gtest/gtest.h>

#include "lf/common/error.h"
#include "lf/rendezvous/kv_store.h"

using lf::rdzv::KvStore;

TEST(KvStore, SetGetEraseAndAddAgree) {
  KvStore s;
  EXPECT_FALSE(s.get("a"));
  s.set("a", "1");
  EXPECT_EQ(*s.get("a"), "1");
  EXPECT_EQ(s.add("a", 41), 42);
  EXPECT_EQ(*s.get("a"), "42");
  EXPECT_EQ(s.add("fresh", -3), -3);
  s.set("text", "hello");
  EXPECT_THROW(s.add("text", 1), lf::ConfigError);
  EXPECT_TRUE(s.erase("a"));
  EXPECT_FALSE(s.erase("a"));
}

TEST(KvStore, CompareSetFollowsTorchSemantics) {
  KvStore s;
  EXPECT_EQ(s.compare_set("k", "x", "y"), "x");  // absent + non-empty expected: nothing stored
  EXPECT_FALSE(s.get("k"));
  EXPECT_EQ(s.compare_set("k", "", "first"), "first");
  EXPECT_EQ(s.compare_set("k", "wrong", "second"), "first");
  EXPECT_EQ(s.compare_set("k", "first", "second"), "second");
  EXPECT_EQ(*s.get("k"), "second");
}

TEST(KvStore, WaitFiresOnceWhenAllKeysExist) {
  KvStore s;
  int fired = 0;
  auto id = s.wait({"a", "b"}, [&] { ++fired; });
  EXPECT_NE(id, 0u);
  s.set("a", "1");
  EXPECT_EQ(fired, 0);
  s.set("b", "1");
  EXPECT_EQ(fired, 1);
  s.set("b", "2");
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(s.waiter_count(), 0u);
  EXPECT_EQ(s.wait({"a"}, [&] { ++fired; }), 0u);  // already satisfied: immediate
  EXPECT_EQ(fired, 2);
}

TEST(KvStore, CounterWaitAndCancel) {
  KvStore s;
  int fired = 0;
  s.wait_counter("barrier", 3, [&] { ++fired; });
  s.add("barrier", 1);
  s.add("barrier", 1);
  EXPECT_EQ(fired, 0);
  s.add("barrier", 1);
  EXPECT_EQ(fired, 1);
  auto id = s.wait({"never"}, [&] { ++fired; });
  EXPECT_TRUE(s.cancel(id));
  EXPECT_FALSE(s.cancel(id));
  s.set("never", "now");
  EXPECT_EQ(fired, 1);
}

TEST(KvStore, ReadyMayMutateTheStore) {
  KvStore s;
  std::vector<std::string> order;
  s.wait({"a"}, [&] {
    order.push_back("a");
    s.set("b", "from a");
  });
  s.wait({"b"}, [&] { order.push_back("b"); });
  s.set("a", "go");
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
}
