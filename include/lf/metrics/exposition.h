#pragma once
// The Prometheus text exposition format (version 0.0.4): what GET /metrics answers.
// A family (# HELP, # TYPE, then its samples) is written in one go: the format wants a
// family's samples together, so callers loop over families first and series second.
// Values print as the shortest text that parses back to the same double (a scraped loss
// equals the logged one); NaN and infinities as Prometheus spells them.
// Not thread-safe: one Exposition per scrape.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lf::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kGauge, kCounter, kHistogram };

class Exposition {
 public:
  // Starts a family. `name` must be a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*).
  void family(std::string_view name, MetricType type, std::string_view help);
  // A sample of the current family (suffix: "_bucket", "_sum", "_count" for histograms).
  void sample(const Labels& labels, double value, std::string_view suffix = {});

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
};

// Prometheus' spelling of a double: "1.5", "1e-05", "NaN", "+Inf", "-Inf".
std::string format_value(double v);
// A label value with \\, \" and \n escaped.
std::string escape_label_value(std::string_view v);

// Cumulative buckets, as a Prometheus histogram counts them.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v, uint64_t times = 1);
  // Writes name_bucket{le=...}, name_sum, name_count under the current family.
  void write(Exposition& e, const Labels& labels) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace lf::metrics
