#include "lf/ui/offline_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <regex>

#include "background_json.h"
#include "curves.h"
#include "lf/common/error.h"
#include "lf/common/wall_clock.h"
#include "state_json.h"

namespace lf::ui {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kReread = std::chrono::seconds(1);
constexpr size_t kMaxCurvePoints = 600;
constexpr size_t kLogLines = 200;

std::optional<json> read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<double> number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
}

// The last `n` lines of a file.
std::deque<std::string> tail(const fs::path& p, size_t n) {
  std::deque<std::string> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    out.push_back(std::move(line));
    if (out.size() > n) out.pop_front();
  }
  return out;
}

// DIR/<rdzv-id>/attempt_<n>/ of the newest attempt (by its number, then the folder's time).
std::optional<fs::path> latest_attempt(const fs::path& log_dir) {
  std::optional<fs::path> best;
  long best_n = -1;
  fs::file_time_type best_time{};
  std::error_code ec;
  const std::regex attempt(R"(attempt_(\d+))");
  for (const auto& job : fs::directory_iterator(log_dir, ec)) {
    if (!job.is_directory()) continue;
    for (const auto& a : fs::directory_iterator(job.path(), ec)) {
      std::smatch m;
      const std::string name = a.path().filename().string();
      if (!a.is_directory() || !std::regex_match(name, m, attempt)) continue;
      const long n = std::stol(m[1]);
      const auto t = fs::last_write_time(a.path(), ec);
      if (n > best_n || (n == best_n && t > best_time)) best = a.path(), best_n = n, best_time = t;
    }
  }
  return best;
}

class OfflineSource final : public PageSource {
 public:
  explicit OfflineSource(OfflineOptions o)
      : dir_(o.output_dir), log_dir_(o.log_dir),
        preview_(std::move(o.preview), "lf-train ui OUTPUT_DIR --config CONFIG.yaml renders the run's data preview") {
    LF_CHECK(fs::exists(dir_ / "trainer_state.json") || fs::exists(dir_ / "trainer_log.jsonl"), ConfigError,
             "lf-train ui: {} holds neither trainer_state.json nor trainer_log.jsonl (expected a run's output_dir, "
             "as the config's output_dir names it)", dir_.string());
  }

  std::string state_json() override {
    const auto now = Clock::now();
    if (!cached_.empty() && now - cached_at_ < kReread) return cached_;
    cached_ = dump(build());
    cached_at_ = now;
    return cached_;
  }

  std::string logs_json(int64_t rank) override {
    json lines = json::array();
    if (auto attempt = log_dir_.empty() ? std::nullopt : latest_attempt(log_dir_)) {
      for (const char* stream : {"stdout.log", "stderr.log"})
        for (auto& l : tail(*attempt / std::to_string(rank) / stream, kLogLines))
          lines.push_back({{"err", std::string(stream) == "stderr.log"}, {"text", std::move(l)}});
    }
    return dump({{"rank", rank}, {"lines", lines}});
  }

  std::string preview_json() override { return preview_.get(); }

 private:
  // log_history (trainer_state.json) when there is one, else trainer_log.jsonl's lines.
  void read_curves(Curves& curves, ProgressMetrics& last, int64_t& step) {
    if (auto st = read_json(dir_ / "trainer_state.json"); st && st->contains("log_history")) {
      for (const auto& e : (*st)["log_history"]) {
        const auto s = number(e, "step");
        if (!s) continue;
        if (auto el = number(e, "eval_loss")) {
          curves.add_eval(static_cast<int64_t>(*s), *el);
          last.eval_loss = el;
          continue;
        }
        if (!number(e, "loss")) continue;
        ProgressMetrics m;
        m.loss = number(e, "loss");
        m.learning_rate = number(e, "learning_rate");
        m.grad_norm = number(e, "grad_norm");
        m.epoch = number(e, "epoch");
        curves.add(static_cast<int64_t>(*s), m);
        last.merge(m);
        step = static_cast<int64_t>(*s);
      }
      if (auto ms = number(*st, "max_steps")) last.total_steps = ms;
      if (auto gs = number(*st, "global_step")) step = static_cast<int64_t>(*gs);
      return;
    }
    std::ifstream in(dir_ / "trainer_log.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const json e = json::parse(line, nullptr, false);
      if (!e.is_object() || !number(e, "current_steps")) continue;
      const auto s = static_cast<int64_t>(*number(e, "current_steps"));
      if (auto el = number(e, "eval_loss")) curves.add_eval(s, *el), last.eval_loss = el;
      ProgressMetrics m;
      m.loss = number(e, "loss");
      m.learning_rate = number(e, "lr");
      m.epoch = number(e, "epoch");
      m.total_steps = number(e, "total_steps");
      m.tokens = number(e, "total_tokens");
      m.tokens_per_s = number(e, "throughput");
      if (m.loss) curves.add(s, m);
      last.merge(m);
      step = s;
    }
  }

  json build() {
    Curves curves;
    ProgressMetrics last;
    int64_t step = 0;
    read_curves(curves, last, step);
    json facts = json::array({json::array({"output_dir", fs::absolute(dir_).string()})});
    const auto results = read_json(dir_ / "all_results.json");
    if (results && results->is_object())
      for (const auto& [k, v] : results->items())
        if (v.is_number()) facts.push_back({k, v.dump()});
    json log_ranks = json::array();
    if (auto attempt = log_dir_.empty() ? std::nullopt : latest_attempt(log_dir_)) {
      std::error_code ec;
      std::vector<int64_t> ranks;
      for (const auto& r : fs::directory_iterator(*attempt, ec)) {
        const std::string name = r.path().filename().string();
        if (r.is_directory() && !name.empty() && name.size() < 10 &&
            std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
          ranks.push_back(std::stoll(name));
      }
      std::sort(ranks.begin(), ranks.end());
      for (auto r : ranks) log_ranks.push_back(r);
    }
    json state;
    state["mode"] = "finished";
    state["now"] = wall_now();
    state["job"] = {{"id", fs::absolute(dir_).filename().string()},
                    {"phase", results ? "finished" : "unfinished"},
                    {"generation", 0},
                    {"restarts", 0},
                    {"facts", facts},
                    {"exit_code", results ? json(0) : json(nullptr)},
                    {"end_reason", results ? "all_results.json written: the run finished" : ""}};
    state["nodes"] = json::array();
    state["log_ranks"] = log_ranks;
    state["progress"] = progress_json(step, last, last.tokens_per_s, std::nullopt, curves);
    state["failures"] = json::array();
    state["health"] = {{"active", json::array()}, {"events", json::array()}};
    state["curves"] = curves.to_json(kMaxCurvePoints);
    return state;
  }

  fs::path dir_, log_dir_;
  BackgroundJson preview_;
  std::string cached_;
  Clock::time_point cached_at_{};
};

}  // namespace

std::unique_ptr<PageSource> make_offline_source(OfflineOptions options) {
  return std::make_unique<OfflineSource>(std::move(options));
}

}  // namespace lf::ui
