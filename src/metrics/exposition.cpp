#include "lf/metrics/exposition.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace lf::metrics {

namespace {

const char* type_name(MetricType t) {
  switch (t) {
    case MetricType::kGauge: return "gauge";
    case MetricType::kCounter: return "counter";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

// HELP text escapes only \\ and \n.
std::string escape_help(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);  // shortest round-trip text
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void Exposition::family(std::string_view name, MetricType type, std::string_view help) {
  name_ = name;
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help), name,
                 type_name(type));
}

void Exposition::sample(const Labels& labels, double value, std::string_view suffix) {
  out_ += name_;
  out_ += suffix;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out_ += ',';
      fmt::format_to(std::back_inserter(out_), "{}=\"{}\"", labels[i].first, escape_label_value(labels[i].second));
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double v, uint64_t times) {
  if (std::isnan(v) || times == 0) return;
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i] += times;
  sum_ += v * static_cast<double>(times);
  count_ += times;
}

void Histogram::write(Exposition& e, const Labels& labels) const {
  uint64_t cumulative = 0;
  Labels with_le = labels;
  with_le.emplace_back("le", "");
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    with_le.back().second = i < bounds_.size() ? format_value(bounds_[i]) : "+Inf";
    e.sample(with_le, static_cast<double>(cumulative), "_bucket");
  }
  e.sample(labels, sum_, "_sum");
  e.sample(labels, static_cast<double>(count_), "_count");
}

}  // namespace lf::metrics
