#pragma once
// `report_to: tensorboard`: the trainer's scalars as TensorBoard event files, written
// natively (no Python). Where and how HF's TensorBoardCallback writes them, so the same
// `tensorboard --logdir output_dir/runs` works:
//   output_dir/runs/<Mon DD_HH-MM-SS>_<host>/events.out.tfevents.<unix time>.<host>.<pid>.0
//   one Event per logged scalar, step = global step, tags as HF's rewrite_logs names them:
//   eval_loss -> eval/loss, eval_runtime -> eval/runtime, loss -> train/loss,
//   learning_rate -> train/learning_rate, grad_norm, epoch, ... (every number of the
//   log_history entry but "step"), plus trainer_log.jsonl's throughput / total_tokens
//   when given as extra entries.
// Torch-free (protobuf-lite). A build without protobuf has the class but its constructor
// refuses (ConfigError naming the packages). Not thread-safe: rank 0's training loop calls it.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace lf::tfevents {

class RecordWriter;

class ScalarLog {
 public:
  // A new run folder under output_dir/runs (ConfigError when it cannot be created).
  static std::unique_ptr<ScalarLog> open_run(const std::filesystem::path& output_dir);
  // Writes into `logdir` (created when missing).
  explicit ScalarLog(const std::filesystem::path& logdir);
  ~ScalarLog();

  // One log event: every number of the HF log_history entry (but "step"), and the
  // trainer_log.jsonl line's throughput and total_tokens (train/throughput, train/total_tokens).
  void log(const nlohmann::json& entry, const nlohmann::json& trainer_log_line, int64_t step);
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars, double wall_time);
  const std::filesystem::path& file() const;

  // HF's rewrite_logs: "eval_loss" -> "eval/loss", "test_x" -> "test/x", else "train/<key>".
  static std::string tag_for(const std::string& key);

 private:
  std::unique_ptr<RecordWriter> writer_;
};

}  // namespace lf::tfevents
