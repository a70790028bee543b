// rank 0's files after a predict run (predict_outputs.h), as LLaMA-Factory 0.9.5 and HF's Trainer write them.
#include "predict_outputs.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/train/similarity_metrics.h"
#include "outputs.h"

namespace lf::train {
namespace fs = std::filesystem;
namespace {

using Row = std::vector<int32_t>;

double py_round(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return std::strtod(buf, nullptr);
}

// json.dumps(text, ensure_ascii=False): nlohmann escapes the same characters the same way (\", \\, \b \f \n
// \r \t, other controls as \u00xx) and leaves the rest as UTF-8.
std::string py_json_string(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The row save_predictions decodes as `predict`: HF's row is [pad] x P_b + generated, end-padded with
// pad to the run's longest row L; its leading pads (the prompt's, then any pads the row starts with) are
// moved to the end: generated[k:] + [pad] x (L - N_b + k), k = the row's leading pads.
Row predicted_row(const Row& generated, int32_t pad, int64_t longest) {
  size_t k = 0;
  while (k < generated.size() && generated[k] == pad) ++k;
  if (k == generated.size()) return Row(static_cast<size_t>(longest), pad);  // all pads: the row unchanged
  Row row(generated.begin() + static_cast<std::ptrdiff_t>(k), generated.end());
  row.resize(static_cast<size_t>(longest), pad);
  return row;
}

// The label row: left-padded to the batch's longest label (the collator pads on the tokenizer's side, left
// under predict_with_generate), end-padded to the run's longest; -100 written as pad.
Row label_row(const Row& label, int32_t pad, int64_t batch_longest, int64_t longest) {
  Row row(static_cast<size_t>(batch_longest) - label.size(), pad);
  row.insert(row.end(), label.begin(), label.end());
  row.resize(static_cast<size_t>(longest), pad);
  return row;
}

struct Lengths {
  int64_t rows = 0;    // HF's predictions' width: max over batches of max(P_b + N_b, max_length)
  int64_t labels = 0;  // the labels' width: the longest label
  std::vector<int64_t> batch_labels;
};

Lengths lengths_of(const std::vector<PredictBatch>& batches, int64_t max_length) {
  Lengths l;
  for (const auto& b : batches) {
    int64_t p = 0, n = 0, lab = 0;
    for (const auto& r : b.prompts) p = std::max<int64_t>(p, static_cast<int64_t>(r.size()));
    for (const auto& r : b.generated) n = std::max<int64_t>(n, static_cast<int64_t>(r.size()));
    for (const auto& r : b.labels) lab = std::max<int64_t>(lab, static_cast<int64_t>(r.size()));
    l.rows = std::max(l.rows, std::max(p + n, max_length));
    l.labels = std::max(l.labels, lab);
    l.batch_labels.push_back(lab);
  }
  return l;
}

void write_jsonl(const std::vector<PredictBatch>& batches, const Tokenizer& tok, const PredictWrite& w,
                 std::vector<std::string>& preds, std::vector<std::string>& labels) {
  const auto lengths = lengths_of(batches, w.generation_max_length);
  const fs::path file = w.output_dir / "generated_predictions.jsonl";
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LF_CHECK(out.good(), ConfigError, "cannot write {} (is output_dir writable?)", tmp.string());
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const auto& b = batches[bi];
      for (size_t i = 0; i < b.prompts.size(); ++i) {
        const Row pred = predicted_row(b.generated[i], w.pad_id, lengths.rows);
        const Row lab = label_row(b.labels[i], w.pad_id, lengths.batch_labels[bi], lengths.labels);
        out << "{\"prompt\": " << py_json_string(tok.decode(b.prompts[i], false))
            << ", \"predict\": " << py_json_string(tok.decode(pred, w.skip_special_tokens))
            << ", \"label\": " << py_json_string(tok.decode(lab, w.skip_special_tokens)) << "}\n";
        // ComputeSimilarity decodes with skip_special_tokens=True whatever the generating arguments say.
        preds.push_back(tok.decode(b.generated[i], true));
        labels.push_back(tok.decode(b.labels[i], true));
      }
    }
    out.flush();
    LF_CHECK(out.good(), ConfigError, "writing {} failed (disk full?)", tmp.string());
  }
  fs::rename(tmp, file);
}

}  // namespace

void write_predictions(const std::vector<PredictBatch>& batches, const Tokenizer& tokenizer, const PredictWrite& w) {
  fs::create_directories(w.output_dir);
  std::vector<std::string> preds, labels;
  write_jsonl(batches, tokenizer, w, preds, labels);
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [k, v] : compute_similarity(preds, labels)) metrics["predict_" + k] = v;
  // HF's speed_metrics: runtime rounded to 4 decimals, the rates to 3; steps = ceil(samples / total batch).
  const double runtime = py_round(w.runtime_s, 4);
  const auto samples = static_cast<double>(preds.size());
  const double steps = std::ceil(samples / static_cast<double>(w.total_batch_size));
  metrics["predict_runtime"] = runtime;
  metrics["predict_samples_per_second"] = py_round(samples / std::max(runtime, 1e-4), 3);
  metrics["predict_steps_per_second"] = py_round(steps / std::max(runtime, 1e-4), 3);
  write_json_file(w.output_dir / "predict_results.json", metrics, 4);
  // HF's save_metrics: all_results.json keeps what an earlier run of this output_dir wrote.
  nlohmann::json all = nlohmann::json::object();
  const fs::path all_file = w.output_dir / "all_results.json";
  if (std::ifstream in(all_file); in) {
    auto old = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (old.is_object()) all = std::move(old);
  }
  for (auto& [k, v] : metrics.items()) all[k] = v;
  write_json_file(all_file, all, 4);
  spdlog::info("***** predict metrics *****");
  for (auto& [k, v] : metrics.items()) spdlog::info("  {} = {}", k, v.dump());
  spdlog::info("predictions of {} examples in {}", preds.size(), (w.output_dir / "generated_predictions.jsonl").string());
}

}  // namespace lf::train
