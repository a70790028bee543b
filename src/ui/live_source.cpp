// The running job as node 0's rendezvous server knows it, turned into the page's JSON. The state
// is rebuilt when a page asks and something changed: at once for a milestone (a failure, a node
// lost or done, the job's phase), at most every kStateCacheMs for the nodes' statuses, and every
// kStateMaxAge anyway (the ages it shows grow); so 10 open pages cost about one build a refresh
// interval. Only the curve points that arrived since the last build are parsed.
#include "lf/ui/live_source.h"

#include <fmt/format.h>

#include <chrono>

#include "background_json.h"
#include "curves.h"
#include "job_health.h"
#include "lf/common/wall_clock.h"
#include "state_json.h"

namespace lf::ui {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr auto kStateCacheMs = std::chrono::milliseconds(250);
constexpr auto kStateMaxAge = std::chrono::milliseconds(1000);
constexpr size_t kMaxCurvePoints = 600;

// What a rank is doing, from its node's last status and the job's phase.
std::string rank_state(const rdzv::RankStatus& r, const rdzv::NodeRecord& n, const rdzv::JobView& v) {
  if (r.exited) return r.exit_code == 0 && r.signal == 0 ? "done" : "failed";
  if (!n.connected && !n.done) return "lost";
  // An ended job has no live process, whatever its node last said before it left.
  if (v.phase == "finished") return "stopped";
  if (v.phase == "stopping") return r.alive ? "stopping" : "stopped";
  if (!r.alive) return "stopped";
  return r.progress ? "running" : "starting";
}

class LiveSource final : public PageSource {
 public:
  LiveSource(const rdzv::RendezvousServer& server, LiveSourceOptions o)
      : server_(server), facts_(std::move(o.facts)), health_(o.thresholds),
        preview_(std::move(o.preview), "this job runs a command of its own (lf-train launch): no dataset to preview") {}

  std::string state_json() override {
    const auto now = Clock::now();
    const rdzv::JobView v = server_.job_view();
    const auto age = now - cached_at_;
    const bool moved = v.record->milestones() != milestones_ || v.phase != phase_;
    const bool fresh = v.record->version() == version_ ? age < kStateMaxAge : age < kStateCacheMs;
    if (!cached_.empty() && !moved && fresh) return cached_;
    milestones_ = v.record->milestones();
    version_ = v.record->version();
    phase_ = v.phase;
    curves_.follow(v.record->points());
    health_.check(*v.record, now, wall_now());
    cached_ = dump(build(v, now));
    cached_at_ = now;
    return cached_;
  }

  std::string logs_json(int64_t rank) override {
    const rdzv::JobView v = server_.job_view();
    json lines = json::array();
    for (const auto& l : v.record->lines(rank)) lines.push_back({{"err", l.err}, {"text", l.text}});
    return dump({{"rank", rank}, {"lines", lines}});
  }

  std::string preview_json() override { return preview_.get(); }

 private:
  struct Sum {
    double total = 0;
    int n = 0;
    void add(const std::optional<double>& x) {
      if (x) total += *x, ++n;
    }
  };
  // The job's figures: sums over the running ranks, and over every rank's last report (what an
  // ended or stopping job shows: the throughput it had, not "–"); global rank 0's record.
  struct Totals {
    ProgressMetrics rank0;
    int64_t step0 = 0;
    Sum tokens, mfu, last_tokens, last_mfu;
  };

  json build(const rdzv::JobView& v, Clock::time_point now) {
    json state;
    state["mode"] = "live";
    state["now"] = wall_now();
    state["job"] = job_json(v);
    std::map<int64_t, int> failures_of;
    for (const auto& f : v.record->failures())
      if (f.global_rank >= 0) ++failures_of[f.global_rank];
    Totals t;
    json nodes = json::array(), log_ranks = json::array();
    for (const auto& [rank, n] : v.record->nodes()) {
      nodes.push_back(node_json(v, n, now, failures_of, t));
      for (const auto& r : nodes.back()["ranks"]) log_ranks.push_back(r["rank"]);
    }
    state["nodes"] = nodes;
    state["log_ranks"] = log_ranks;
    const bool live = v.phase == "running";
    const Sum& tokens = live ? t.tokens : t.last_tokens;
    const Sum& mfu = live ? t.mfu : t.last_mfu;
    state["progress"] = progress_json(t.step0, t.rank0, tokens.n ? std::optional<double>(tokens.total) : std::nullopt,
                                      mfu.n ? std::optional<double>(mfu.total / mfu.n) : std::nullopt, curves_);
    state["failures"] = failures_json(*v.record);
    state["health"] = health_.to_json();
    state["curves"] = curves_.to_json(kMaxCurvePoints);
    return state;
  }

  json job_json(const rdzv::JobView& v) const {
    json facts = json::array();
    for (const auto& [k, val] : facts_) facts.push_back({k, val});
    return {{"id", v.job_id},
            {"phase", v.phase},
            {"generation", v.generation},
            {"restarts", v.restarts},
            {"max_restarts", v.max_restarts},
            {"nnodes", v.min_nodes == v.max_nodes ? std::to_string(v.min_nodes)
                                                  : fmt::format("{}:{}", v.min_nodes, v.max_nodes)},
            {"world_size", v.world_size},
            {"formed_at", v.formed_at},
            {"exit_code", v.exit_code ? json(*v.exit_code) : json(nullptr)},
            {"end_reason", v.end_reason},
            {"waiting", v.waiting},
            {"facts", facts}};
  }

  json node_json(const rdzv::JobView& v, const rdzv::NodeRecord& n, Clock::time_point now,
                 std::map<int64_t, int>& failures_of, Totals& t) const {
    json node = {{"node_rank", n.node_rank}, {"hostname", n.hostname}, {"address", n.address},
                 {"connected", n.connected}, {"lost", n.lost},         {"done", n.done},
                 {"nproc", n.nproc},         {"gpu_note", ""}};
    const auto silent = v.silent_s.find(n.node_rank);
    node["silent_s"] = silent != v.silent_s.end() ? json(silent->second) : json(nullptr);
    json ranks = json::array(), gpus = json::array();
    if (n.status) {
      const double age = std::chrono::duration<double>(now - n.status_at).count();
      node["status_age_s"] = age;
      node["gpu_note"] = n.status->gpu_note;
      const auto hot = health_.flagged_gpus();
      for (const auto& g : n.status->gpus)
        gpus.push_back({{"index", g.index}, {"name", g.name}, {"uuid", g.uuid}, {"util", g.utilization},
                        {"mem_used", g.memory_used_bytes}, {"mem_total", g.memory_total_bytes},
                        {"temp", g.temperature_celsius}, {"power", g.power_watts},
                        {"flagged", hot.count(fmt::format("{}:{}", n.node_rank, g.index)) > 0}});
      const auto flagged = health_.flagged_ranks();
      for (const auto& r : n.status->ranks) {
        const ProgressMetrics m = ProgressMetrics::parse(r.metrics_json);
        const std::string state = rank_state(r, n, v);
        if (state == "running") t.tokens.add(m.tokens_per_s), t.mfu.add(m.mfu);
        t.last_tokens.add(m.tokens_per_s), t.last_mfu.add(m.mfu);
        if (r.rank == 0) t.rank0 = m, t.step0 = r.step;
        ranks.push_back({{"rank", r.rank}, {"local_rank", r.local_rank}, {"pid", r.pid}, {"state", state},
                         {"phase", r.phase}, {"step", r.step},
                         {"beat_age_s", r.heard ? json(r.since_beat_s + age) : json(nullptr)},
                         {"exit", r.exited ? exit_text(r.exit_code, r.signal) : ""}, {"exit_code", r.exit_code},
                         {"signal", r.signal}, {"failures", failures_of[r.rank]}, {"gpu", r.gpu},
                         {"tokens_per_s", m.tokens_per_s ? json(*m.tokens_per_s) : json(nullptr)},
                         {"mfu", m.mfu ? json(*m.mfu) : json(nullptr)},
                         {"step_s", m.step_s ? json(*m.step_s) : json(nullptr)}, {"last_line", r.last_line},
                         {"flagged", flagged.count(r.rank) > 0}});
      }
    }
    node["ranks"] = ranks;
    node["gpus"] = gpus;
    return node;
  }

  static json failures_json(const rdzv::JobRecord& record) {
    json out = json::array();
    for (const auto& f : record.failures())
      out.push_back({{"t", f.wall_time}, {"generation", f.generation}, {"node_rank", f.node_rank},
                     {"rank", f.global_rank}, {"exit", f.global_rank >= 0 ? exit_text(f.exit_code, f.signal) : ""},
                     {"exit_code", f.exit_code}, {"signal", f.signal}, {"restartable", f.restartable},
                     {"message", f.message}});
    return out;
  }

  const rdzv::RendezvousServer& server_;
  std::vector<std::pair<std::string, std::string>> facts_;
  Curves curves_;
  JobHealth health_;
  BackgroundJson preview_;
  std::string cached_;
  Clock::time_point cached_at_{};
  uint64_t milestones_ = 0, version_ = 0;
  std::string phase_;
};

}  // namespace

std::unique_ptr<PageSource> make_live_source(const rdzv::RendezvousServer& server, LiveSourceOptions options) {
  return std::make_unique<LiveSource>(server, std::move(options));
}

}  // namespace lf::ui
