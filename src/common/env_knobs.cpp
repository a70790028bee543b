#include "lf/common/env_knobs.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "lf/common/error.h"

namespace lf {

namespace {

// The set value, or nullopt when unset or empty (as the shell's `VAR=` means "not set").
std::optional<std::string> raw(const EnvKnob& k) {
  const char* v = std::getenv(std::string(k.name).c_str());
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

[[noreturn]] void malformed(const EnvKnob& k, const std::string& seen, std::string_view expected) {
  LF_THROW(ConfigError, "environment variable {}='{}': expected {}{} ({}: {})", k.name, seen, expected,
           k.default_value.empty() ? std::string() : fmt::format("; unset means {}", k.default_value), k.name,
           k.meaning);
}

// The set value, else the registered default, else nullopt.
std::optional<std::string> value_or_default(const EnvKnob& k) {
  if (auto v = raw(k)) return v;
  if (k.default_value.empty()) return std::nullopt;
  return std::string(k.default_value);
}

bool is_choice(std::string_view choices, std::string_view v) {
  while (!choices.empty()) {
    const auto bar = choices.find('|');
    if (choices.substr(0, bar) == v) return true;
    if (bar == std::string_view::npos) break;
    choices.remove_prefix(bar + 1);
  }
  return false;
}

std::optional<double> parse_number(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::string> knob_string(KnobRef<KnobType::kString, KnobType::kPath, KnobType::kChoice> ref) {
  const EnvKnob& k = *ref.knob;
  auto v = value_or_default(k);
  if (v && k.type == KnobType::kChoice && !is_choice(k.choices, *v)) malformed(k, *v, fmt::format("one of {}", k.choices));
  return v;
}

std::optional<int64_t> knob_int(KnobRef<KnobType::kInt> ref) {
  const EnvKnob& k = *ref.knob;
  auto v = value_or_default(k);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0' || errno == ERANGE) malformed(k, *v, "an integer");
  return static_cast<int64_t>(n);
}

std::optional<double> knob_number(KnobRef<KnobType::kNumber, KnobType::kSeconds> ref) {
  const EnvKnob& k = *ref.knob;
  auto v = value_or_default(k);
  if (!v) return std::nullopt;
  const auto n = parse_number(*v);
  if (!n) malformed(k, *v, k.type == KnobType::kSeconds ? "a number of seconds" : "a number");
  if (k.type == KnobType::kSeconds && *n < 0) malformed(k, *v, "a number of seconds >= 0");
  return n;
}

std::optional<bool> knob_bool(KnobRef<KnobType::kBool> ref) {
  const EnvKnob& k = *ref.knob;
  auto v = value_or_default(k);
  if (!v) return std::nullopt;
  if (*v != "0" && *v != "1") malformed(k, *v, "1 (on) or 0 (off)");
  return *v == "1";
}

bool knob_is_set(AnyKnob ref) { return raw(*ref.knob).has_value(); }

std::span<const EnvKnob> env_knobs() { return kEnvKnobs; }

const EnvKnob* find_env_knob(std::string_view name) {
  for (const EnvKnob& k : kEnvKnobs)
    if (k.name == name) return &k;
  return nullptr;
}

const char* knob_type_name(KnobType t) {
  switch (t) {
    case KnobType::kString: return "text";
    case KnobType::kPath: return "path";
    case KnobType::kInt: return "integer";
    case KnobType::kSeconds: return "seconds";
    case KnobType::kNumber: return "number";
    case KnobType::kBool: return "0|1";
    case KnobType::kChoice: return "choice";
  }
  return "?";
}

namespace {

std::string type_text(const EnvKnob& k) {
  return k.type == KnobType::kChoice ? std::string(k.choices) : knob_type_name(k.type);
}

// Table cells hold `|` only escaped.
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string env_knobs_markdown() {
  std::string out = "| variable | values | default | read by | meaning |\n|---|---|---|---|---|\n";
  for (const EnvKnob& k : kEnvKnobs)
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", k.name, cell(type_text(k)),
                       k.default_value.empty() ? "unset" : fmt::format("`{}`", k.default_value), k.read_by,
                       cell(k.meaning));
  return out;
}

std::string env_knobs_text() {
  std::string out;
  for (const EnvKnob& k : kEnvKnobs) {
    const auto v = raw(k);
    out += fmt::format("{} ({}; default {}; read by {}){}\n    {}\n", k.name, type_text(k),
                       k.default_value.empty() ? "unset" : std::string(k.default_value), k.read_by,
                       v ? fmt::format(" = '{}'", *v) : std::string(), k.meaning);
  }
  return out;
}

}  // namespace lf
