// TensorBoard event files: CRC-32C against the published check values, the TFRecord framing,
// and a ScalarLog file read back record by record (lengths and both CRCs verified).
// test_tensorboard_reader.py reads a file back with TensorBoard's own reader (tests/train/test_observe.py: a
// training run's file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lf/common/error.h"
#include "lf/tfevents/crc32c.h"
#include "lf/tfevents/record_writer.h"
#include "lf/tfevents/scalar_log.h"

namespace lf::tfevents {
namespace {

namespace fs = std::filesystem;

TEST(Crc32c, CheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value (RFC 3720 B.4)
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720: 32 bytes of zeros
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
}

TEST(RecordWriter, FramingIsLengthCrcDataCrc) {
  const std::string rec = RecordWriter::frame("abc");
  ASSERT_EQ(rec.size(), 8u + 4 + 3 + 4);
  uint64_t len = 0;
  std::memcpy(&len, rec.data(), 8);
  EXPECT_EQ(len, 3u);
  uint32_t c1 = 0, c2 = 0;
  std::memcpy(&c1, rec.data() + 8, 4);
  std::memcpy(&c2, rec.data() + 15, 4);
  EXPECT_EQ(c1, masked_crc32c(std::string_view(rec.data(), 8)));
  EXPECT_EQ(c2, masked_crc32c("abc"));
  const uint32_t raw = crc32c("abc");
  EXPECT_EQ(c2, ((raw >> 15) | (raw << 17)) + 0xa282ead8u);
}

// Every record of an event file, checked.
std::vector<std::string> read_records(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> out;
  size_t at = 0;
  while (at < all.size()) {
    EXPECT_GE(all.size() - at, 16u);
    uint64_t len = 0;
    uint32_t c1 = 0, c2 = 0;
    std::memcpy(&len, all.data() + at, 8);
    std::memcpy(&c1, all.data() + at + 8, 4);
    EXPECT_EQ(c1, masked_crc32c(std::string_view(all.data() + at, 8)));
    const std::string data = all.substr(at + 12, len);
    std::memcpy(&c2, all.data() + at + 12 + len, 4);
    EXPECT_EQ(c2, masked_crc32c(data));
    out.push_back(data);
    at += 16 + len;
  }
  return out;
}

TEST(ScalarLog, HfTagsOneEventPerScalarAfterTheVersionRecord) {
  EXPECT_EQ(ScalarLog::tag_for("loss"), "train/loss");
  EXPECT_EQ(ScalarLog::tag_for("eval_loss"), "eval/loss");
  EXPECT_EQ(ScalarLog::tag_for("eval_runtime"), "eval/runtime");
  const fs::path dir = fs::temp_directory_path() / fmt::format("lf-tb-{}", ::getpid());
  fs::remove_all(dir);
  try {
    auto log = ScalarLog::open_run(dir);
    log->log({{"loss", 2.5}, {"learning_rate", 1e-4}, {"step", 3}, {"note", "text"}}, {{"throughput", 99.5}}, 3);
    const fs::path file = log->file();
    EXPECT_EQ(file.parent_path().parent_path(), dir / "runs");
    EXPECT_EQ(file.filename().string().rfind("events.out.tfevents.", 0), 0u) << file;
    log.reset();
    const auto recs = read_records(file);
    ASSERT_EQ(recs.size(), 4u);  // file_version, loss, learning_rate, throughput ("step" and text are not scalars)
    EXPECT_NE(recs[0].find("brain.Event:2"), std::string::npos);
    // The entry's keys in nlohmann::json's (sorted) order.
    EXPECT_NE(recs[1].find("train/learning_rate"), std::string::npos);
    EXPECT_NE(recs[2].find("train/loss"), std::string::npos);
    EXPECT_NE(recs[3].find("train/throughput"), std::string::npos);
  } catch (const ConfigError& e) {
    // A build without protobuf refuses instead (scalar_log_unavailable.cpp).
    EXPECT_NE(std::string(e.what()).find("built without protobuf"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// tests/tfevents/test_tensorboard_reader.py runs this with LF_TFEVENTS_DUMP_DIR set and reads the
// file back with TensorBoard's EventAccumulator: five steps of train scalars, one evaluation.
TEST(ScalarLog, FileForTheTensorBoardReader) {
  const char* dump = std::getenv("LF_TFEVENTS_DUMP_DIR");
  if (!dump) GTEST_SKIP() << "LF_TFEVENTS_DUMP_DIR not set";
  auto log = ScalarLog::open_run(dump);
  for (int step = 1; step <= 5; ++step)
    log->log({{"loss", 2.5 - 0.25 * step}, {"learning_rate", 1e-4 * step}, {"grad_norm", 0.1 + step / 3.0},
              {"epoch", step / 5.0}, {"step", step}},
             {{"throughput", 1000.0 + step}, {"total_tokens", 512 * step}}, step);
  log->log({{"eval_loss", 1.75}, {"eval_runtime", 0.125}, {"step", 5}}, nlohmann::json::object(), 5);
}

TEST(ScalarLog, UnwritableFolderIsAClearError) {
  try {
    ScalarLog log("/proc/lf-no-such-dir/runs");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_TRUE(w.find("/proc/lf-no-such-dir/runs") != std::string::npos || w.find("without protobuf") != std::string::npos)
        << w;
  }
}

}  // namespace
}  // namespace lf::tfevents
