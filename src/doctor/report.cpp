#include "lf/doctor/report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace lf::doctor {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kInfo: return "INFO";
    case Verdict::kWarn: return "WARN";
    case Verdict::kFail: return "FAIL";
  }
  return "?";
}

void Report::add(std::string check, Verdict v, std::string detail, std::string fix) {
  results_.push_back({std::move(check), v, std::move(detail), std::move(fix)});
}

bool Report::any_fail() const { return count(Verdict::kFail) > 0; }

int Report::count(Verdict v) const {
  int n = 0;
  for (const auto& r : results_) n += r.verdict == v;
  return n;
}

std::string Report::text(const std::string& header) const {
  std::string out = header + "\n";
  for (const auto& r : results_) {
    out += fmt::format("{}  {:<16} {}\n", verdict_name(r.verdict), r.check, r.detail);
    if (!r.fix.empty()) out += fmt::format("      {:<16} -> {}\n", "", r.fix);
  }
  out += fmt::format("doctor: {} PASS, {} WARN, {} FAIL{}\n", count(Verdict::kPass), count(Verdict::kWarn),
                     count(Verdict::kFail), any_fail() ? ": fix the FAIL lines before starting the job" : "");
  return out;
}

std::string Report::json(const std::string& node, const std::string& hostname) const {
  nlohmann::ordered_json j;
  j["node"] = node;
  j["hostname"] = hostname;
  j["ok"] = !any_fail();
  auto& checks = j["checks"] = nlohmann::ordered_json::array();
  for (const auto& r : results_)
    checks.push_back({{"check", r.check}, {"status", verdict_name(r.verdict)}, {"detail", r.detail}, {"fix", r.fix}});
  j["summary"] = {{"pass", count(Verdict::kPass)}, {"warn", count(Verdict::kWarn)}, {"fail", count(Verdict::kFail)}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace lf::doctor
