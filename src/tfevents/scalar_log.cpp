#include "lf/tfevents/scalar_log.h"

#include <unistd.h>

#include <chrono>
#include <ctime>

#include "lf/common/error.h"
#include "lf/common/hostname.h"
#include "lf/common/wall_clock.h"
#include "lf/tfevents/record_writer.h"
#include "tf_event.pb.h"

namespace lf::tfevents {

namespace fs = std::filesystem;

namespace {

}  // namespace

std::unique_ptr<ScalarLog> ScalarLog::open_run(const fs::path& output_dir) {
  // HF's default logging_dir: runs/<datetime.now().strftime("%b%d_%H-%M-%S")>_<hostname>.
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), "%b%d_%H-%M-%S", &local);
  return std::make_unique<ScalarLog>(output_dir / "runs" / (std::string(stamp) + "_" + this_hostname()));
}

ScalarLog::ScalarLog(const fs::path& logdir) {
  std::error_code ec;
  fs::create_directories(logdir, ec);
  LF_CHECK(!ec, ConfigError, "report_to: tensorboard: cannot create {}: {}", logdir.string(), ec.message());
  const auto name = fmt::format("events.out.tfevents.{:010d}.{}.{}.0", static_cast<int64_t>(std::time(nullptr)),
                                this_hostname(), ::getpid());
  writer_ = std::make_unique<RecordWriter>(logdir / name);
  proto::Event version;
  version.set_wall_time(wall_now());
  version.set_file_version("brain.Event:2");  // what every TensorBoard event file starts with
  writer_->write(version.SerializeAsString());
  writer_->flush();
}

ScalarLog::~ScalarLog() = default;

const fs::path& ScalarLog::file() const { return writer_->path(); }

std::string ScalarLog::tag_for(const std::string& key) {
  if (key.rfind("eval_", 0) == 0) return "eval/" + key.substr(5);
  if (key.rfind("test_", 0) == 0) return "test/" + key.substr(5);
  return "train/" + key;
}

void ScalarLog::log(const nlohmann::json& entry, const nlohmann::json& trainer_log_line, int64_t step) {
  std::vector<std::pair<std::string, double>> scalars;
  for (const auto& [k, v] : entry.items())
    if (k != "step" && v.is_number()) scalars.emplace_back(tag_for(k), v.get<double>());
  // trainer_log's throughput on an evaluation or end-of-training entry is the same counter read
  // later: one value per step in the event file, the training line's (HF's TensorBoardCallback
  // logs only an evaluation's eval_* metrics and the run's train_* summary there).
  if (!entry.contains("loss")) return add_scalars(step, scalars, wall_now());
  for (const char* k : {"throughput", "total_tokens"})
    if (auto it = trainer_log_line.find(k); it != trainer_log_line.end() && it->is_number() && !entry.contains(k))
      scalars.emplace_back(tag_for(k), it->get<double>());
  add_scalars(step, scalars, wall_now());
}

void ScalarLog::add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars,
                            double wall_time) {
  // One Event per scalar, as torch's SummaryWriter.add_scalar writes them.
  for (const auto& [tag, value] : scalars) {
    proto::Event e;
    e.set_wall_time(wall_time);
    e.set_step(step);
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
    writer_->write(e.SerializeAsString());
  }
  writer_->flush();
}

}  // namespace lf::tfevents
