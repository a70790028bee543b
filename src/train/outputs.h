#pragma once
// The files HF Trainer and LLaMA-Factory leave in output_dir, written the way they
// write them (key names, sort order, indentation), and training_loss.png drawn with
// cairo as LLaMA-Factory's plot_loss draws it (raw curve + EMA-smoothed curve).
// Internal to lf_train. Not thread-safe.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace lf::train {

// "H:MM:SS" as Python's str(timedelta(seconds=int(s))).
std::string format_timedelta(double seconds);

// Appends one JSON line per HF log event (LLaMA-Factory's LogCallback).
class TrainerLogWriter {
 public:
  explicit TrainerLogWriter(const std::filesystem::path& file);
  void write(const nlohmann::ordered_json& line);

 private:
  std::ofstream out_;
};

// json.dumps(obj, indent, sort_keys=True) + "\n", written to a temp file and renamed.
void write_json_file(const std::filesystem::path& file, const nlohmann::json& obj, int indent);

// LLaMA-Factory's plot_loss for one key: points (step, value); false when empty (loss_plot.cpp).
bool plot_curve(const std::filesystem::path& png, const std::vector<std::pair<double, double>>& points,
                const std::string& key, const std::string& title);

// LLaMA-Factory's smooth(): EMA with weight 1.8 * (1 / (1 + exp(-0.05 n)) - 0.5) (loss_plot.cpp).
std::vector<double> smooth_curve(const std::vector<double>& values);

}  // namespace lf::train
