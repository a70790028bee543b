#include "lf/data/drop_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "lf/common/error.h"
#include "lf/data/data_args.h"

namespace lf {

void DropReport::merge(const DropReport& other) {
  records += other.records;
  dropped += other.dropped;
  for (const auto& [cause, n] : other.by_cause) by_cause[cause] += n;
  for (const auto& [cause, where] : other.first)
    for (const auto& w : where)
      if (first[cause].size() < kShown) first[cause].push_back(w);
}

std::string DropReport::text(const std::string& datasets) const {
  if (dropped == 0) return "";
  std::vector<std::string> causes;
  for (const auto& [cause, n] : by_cause) {
    const auto& where = first.at(cause);
    causes.push_back(fmt::format("{} with {} ({}{})", n, cause, fmt::join(where, ", "), n > where.size() ? ", ..." : ""));
  }
  return fmt::format("dataset {}: {} of {} records dropped, no training example can be made of them: {}", datasets,
                     dropped, records, fmt::join(causes, "; "));
}

std::string why_dropped(const Example& e) {
  if (!e.invalid.empty()) return e.invalid;
  if (e.prompt.size() % 2 != 1 || e.response.size() != 1)
    return fmt::format("no prompt/response pair ({} prompt turn(s), {} response(s))", e.prompt.size(), e.response.size());
  return "";
}

DropReport find_dropped(const std::vector<Example>& examples, const std::string& stage) {
  DropReport r;
  if (stage != "sft") return r;
  r.records = examples.size();
  for (const auto& e : examples) {
    const std::string why = why_dropped(e);
    if (why.empty()) continue;
    ++r.dropped;
    ++r.by_cause[why];
    auto& where = r.first[why];
    if (where.size() < DropReport::kShown) where.push_back(e.origin);
  }
  return r;
}

void report_dropped(const DropReport& report, const DataArgs& args) {
  if (report.dropped == 0) return;
  const std::string text = report.text(fmt::format("{}", fmt::join(args.dataset, ",")));
  LF_CHECK(args.invalid_records != "error", ConfigError,
           "{} (invalid_records: error); fix those records, or set invalid_records: warn to train without them",
           text);
  spdlog::warn("{}; LLaMA-Factory drops them too (invalid_records: error makes this an error)", text);
}

}  // namespace lf
