#pragma once
// What `lf-train doctor` prints: one line per check, PASS / WARN / FAIL (INFO for facts
// that need no action), what was seen, and for WARN / FAIL what to do. As text for people
// or JSON (--json) for scripts. Not thread-safe.
#include <string>
#include <vector>

namespace lf::doctor {

enum class Verdict { kPass, kInfo, kWarn, kFail };

const char* verdict_name(Verdict v);

struct CheckResult {
  std::string check;  // short id: "gpus", "shm", "master-port", ...
  Verdict verdict = Verdict::kPass;
  std::string detail;  // what was seen
  std::string fix;     // what to do (WARN / FAIL)
};

class Report {
 public:
  void add(std::string check, Verdict v, std::string detail, std::string fix = "");
  void pass(std::string check, std::string detail) { add(std::move(check), Verdict::kPass, std::move(detail)); }
  void info(std::string check, std::string detail) { add(std::move(check), Verdict::kInfo, std::move(detail)); }
  void warn(std::string check, std::string detail, std::string fix) {
    add(std::move(check), Verdict::kWarn, std::move(detail), std::move(fix));
  }
  void fail(std::string check, std::string detail, std::string fix) {
    add(std::move(check), Verdict::kFail, std::move(detail), std::move(fix));
  }

  const std::vector<CheckResult>& results() const { return results_; }
  bool any_fail() const;
  int count(Verdict v) const;
  // header: "lf-train doctor on node 0 (host-a)"
  std::string text(const std::string& header) const;
  std::string json(const std::string& node, const std::string& hostname) const;

 private:
  std::vector<CheckResult> results_;
};

}  // namespace lf::doctor
