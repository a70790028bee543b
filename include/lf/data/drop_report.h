#pragma once
// Records a dataset has that training cannot use, counted by cause with where they are
// (file:line), so a shrunken dataset is never silent. LLaMA-Factory drops such records too
// ("Dropped invalid example", one warning each); lf-train drops the same ones and says, once,
// how many of how many, why, and the first few of each cause. `invalid_records: error` (an
// lf-train key) makes any drop a ConfigError instead. Training, `lf-train preview` and
// `lf-train doctor` report the same counts (the same function over the same records).
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "lf/data/example.h"

namespace lf {

struct DataArgs;

struct DropReport {
  static constexpr size_t kShown = 5;  // origins listed per cause
  size_t records = 0;
  size_t dropped = 0;
  std::map<std::string, size_t> by_cause;
  std::map<std::string, std::vector<std::string>> first;  // cause -> the first kShown origins

  void merge(const DropReport& other);
  // "dataset x: 114 of 300 records dropped (no training example can be made of them): 100 with
  // 'output' null (a.json:3, a.json:6, ...), 14 with ...". Empty when nothing was dropped.
  std::string text(const std::string& datasets) const;
};

// Whether encode_supervised can make a training example of it (one response after an odd
// number of prompt turns), and if not, why.
std::string why_dropped(const Example& example);

// The records of `examples` an sft run drops; none for other stages (pt trains on every text).
DropReport find_dropped(const std::vector<Example>& examples, const std::string& stage);

// Logs the report once (a warning), or throws ConfigError with it under invalid_records: error.
void report_dropped(const DropReport& report, const DataArgs& args);

}  // namespace lf
