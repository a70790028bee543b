#include <gtest/gtest.h>

#include "lf/common/error.h"
#include "lf/config/elastic_batch.h"

using namespace lf::config;

namespace {

JobPlan with_batch(int64_t micro, int64_t accum) {
  JobPlan c;
  c.schedule.per_device_train_batch_size = micro;
  c.schedule.gradient_accumulation_steps = accum;
  return c;
}

}  // namespace

TEST(ElasticBatch, ALostNodeRaisesTheAccumulationWhenItDivides) {
  auto c = with_batch(2, 2);  // 3 ranks: 12 examples a step
  const auto note = keep_elastic_global_batch(c, 3, 2);
  EXPECT_EQ(c.schedule.gradient_accumulation_steps, 3);
  EXPECT_NE(note.find("gradient_accumulation_steps 2 -> 3"), std::string::npos) << note;
  EXPECT_NE(note.find("stays 12 examples"), std::string::npos) << note;
  auto back = with_batch(2, 2);  // the node returns: the first round's layout again
  EXPECT_EQ(keep_elastic_global_batch(back, 3, 3), "");
  EXPECT_EQ(back.schedule.gradient_accumulation_steps, 2);
  auto grown = with_batch(4, 3);  // started on 2 ranks, a third admitted later
  keep_elastic_global_batch(grown, 2, 3);
  EXPECT_EQ(grown.schedule.gradient_accumulation_steps, 2);
}

TEST(ElasticBatch, NotAnElasticJobChangesNothing) {
  auto c = with_batch(2, 5);
  EXPECT_EQ(keep_elastic_global_batch(c, 0, 7), "");
  EXPECT_EQ(c.schedule.gradient_accumulation_steps, 5);
}

TEST(ElasticBatch, ARoundThatCannotKeepTheGlobalBatchIsRefusedWithTheNumbers) {
  auto c = with_batch(2, 1);  // 3 ranks, accumulation 1: 3 micro-batches a step cannot go to 2 ranks
  try {
    keep_elastic_global_batch(c, 3, 2);
    FAIL() << "no refusal";
  } catch (const lf::ConfigError& e) {
    const std::string m = e.what();
    for (const char* part : {"world size 2", "global batch is 6 examples", "per_device_train_batch_size 2",
                             "gradient_accumulation_steps 1", "world size 3 of its first round", "1 x 3 = 3",
                             "divides 3 (1, 3)"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
    EXPECT_EQ(e.exit_code(), 2);
  }
  EXPECT_EQ(c.schedule.gradient_accumulation_steps, 1) << "a refusal changes nothing";
}
