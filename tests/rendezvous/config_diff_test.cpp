// A config mismatch between nodes names the keys and both values, never a secret.
#include <gtest/gtest.h>

#include "lf/rendezvous/config_diff.h"

using namespace lf::rdzv;

TEST(ConfigDiff, NamesEachDifferingKeyWithBothValues) {
  const std::vector<std::string> a = {"dataset=alpaca", "learning_rate=1e-4", "seed=1"};
  const std::vector<std::string> b = {"dataset=alpaca", "lora_rank=16", "seed=2"};
  EXPECT_EQ(describe_config_difference(a, "node 0", b, "node 1"),
            "learning_rate: '1e-4' on node 0 vs (not set) on node 1; lora_rank: (not set) on node 0 vs '16' on node 1; "
            "seed: '1' on node 0 vs '2' on node 1");
  EXPECT_EQ(describe_config_difference(a, "node 0", a, "node 1"), "");
}

TEST(ConfigDiff, SecretsTravelAsDigestsAndAreNeverShown) {
  const auto a = config_item("hub_token", "hf_aaaa"), b = config_item("hub_token", "hf_bbbb");
  EXPECT_EQ(a.find("hf_aaaa"), std::string::npos) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(config_item("hub_token", "hf_aaaa"), a);
  EXPECT_EQ(describe_config_difference({a}, "x", {b}, "y"), "hub_token: (a different secret) on x vs (a different secret) on y");
}

TEST(ConfigDiff, ManyDifferencesAreCutAndLongValuesShortened) {
  std::vector<std::string> a, b;
  for (int i = 0; i < 12; ++i) {
    a.push_back("k" + std::to_string(10 + i) + "=a");
    b.push_back("k" + std::to_string(10 + i) + "=b");
  }
  const auto d = describe_config_difference(a, "x", b, "y", 3);
  EXPECT_NE(d.find("; and 9 more key(s)"), std::string::npos) << d;
  const auto longer = describe_config_difference({"command=" + std::string(500, 'x')}, "x", {"command=y"}, "y");
  EXPECT_LT(longer.size(), 200u) << longer;
  EXPECT_NE(longer.find("xxx...'"), std::string::npos) << longer;
}
