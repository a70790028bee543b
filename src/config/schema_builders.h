#pragma once
// How config_schema.cpp builds a declaration: for each C++ field type, how it is read
// from YAML, shown as text and given a sample value; the per-key rules (positive,
// in_range, ...); and the Implemented<T> builder that binds a key to its JobPlan
// field of a plan section. Included by config_schema.cpp only.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "config_schema.h"

namespace lf::config::schema {

// ---- how each C++ field type is read, shown and given a sample value

template <typename T>
struct Type;
template <>
struct Type<std::string> {
  static constexpr const char* expected = "a string";
  static constexpr const char* doc = "text";
};
template <>
struct Type<int64_t> {
  static constexpr const char* expected = "an integer";
  static constexpr const char* doc = "integer";
};
template <>
struct Type<int> {
  static constexpr const char* expected = "an integer";
  static constexpr const char* doc = "integer";
};
template <>
struct Type<double> {
  static constexpr const char* expected = "a number";
  static constexpr const char* doc = "number";
};
template <>
struct Type<bool> {
  static constexpr const char* expected = "true or false";
  static constexpr const char* doc = "bool";
};
template <typename T>
struct Type<std::optional<T>> {
  static constexpr const char* expected = Type<T>::expected;
  static constexpr const char* doc = Type<T>::doc;
};
template <>
struct Type<std::vector<std::string>> {
  static constexpr const char* expected = "a list";
  static constexpr const char* doc = "list";
};
template <>
struct Type<std::vector<double>> {
  static constexpr const char* expected = "a list of probabilities";
  static constexpr const char* doc = "list of numbers";
};

inline std::string show_value(const std::string& v) { return v; }
inline std::string show_value(bool v) { return v ? "true" : "false"; }
inline std::string show_value(double v) { return fmt::format("{}", v); }
template <typename T>
  requires std::is_integral_v<T>
std::string show_value(T v) {
  return std::to_string(v);
}
template <typename T>
std::string show_value(const std::optional<T>& v) {
  return v ? show_value(*v) : "null";
}
template <typename T>
std::string show_value(const std::vector<T>& v) {
  std::vector<std::string> items;
  for (const auto& x : v) items.push_back(show_value(x));
  return fmt::format("{}", fmt::join(items, ","));
}

template <typename T>
void read_value(const Reader& r, const std::string& key, T& out) {
  r.read(key, out, Type<T>::expected);
}
template <typename T>
void read_value(const Reader& r, const std::string& key, std::optional<T>& out) {
  r.read_optional(key, out, Type<T>::expected);
}
inline void read_value(const Reader& r, const std::string& key, std::vector<std::string>& out) { r.read_list(key, out); }
inline void read_value(const Reader& r, const std::string& key, std::vector<double>& out) {
  if (!r.has(key)) return;
  std::vector<std::string> items;
  r.read_list(key, items);
  out.clear();
  for (const auto& p : items) {
    char* end = nullptr;
    const double v = std::strtod(p.c_str(), &end);
    LF_CHECK(end && *end == '\0' && v >= 0, ConfigError, "{}: `{}` entry '{}' is not a probability", r.where(key), key,
             p);
    out.push_back(v);
  }
}

// A value the parse accepts and that differs from the default (for the test that every
// implemented key is read). Keys whose derived sample does not fit say `.sample(...)`.
template <typename T>
std::string derived_sample(const T& def, const std::vector<std::string>& choices) {
  if constexpr (std::is_same_v<T, bool>) {
    return def ? "false" : "true";
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int>) {
    return std::to_string(def + 1);
  } else if constexpr (std::is_same_v<T, double>) {
    return def == 0 ? "0.5" : fmt::format("{}", def / 2);
  } else if constexpr (std::is_same_v<T, std::string>) {
    for (const auto& c : choices)
      if (c != def) return c;
    return choices.empty() ? "sample" : "";
  } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
    return "3";
  } else if constexpr (std::is_same_v<T, std::optional<double>>) {
    return "0.5";
  } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
    return "sample";
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return "sample_a,sample_b";
  } else {
    return "";
  }
}

// ---- per-key rules

inline const auto positive = [](const Reader& r, const std::string& key, auto v) {
  LF_CHECK(v > 0, ConfigError, "{}: `{}` must be > 0, got {}", r.where(key), key, v);
};
inline const auto non_negative = [](const Reader& r, const std::string& key, auto v) {
  LF_CHECK(v >= 0, ConfigError, "{}: `{}` must be >= 0, got {}", r.where(key), key, v);
};
inline const auto not_empty = [](const Reader& r, const std::string& key, const std::vector<std::string>& v) {
  LF_CHECK(!v.empty(), ConfigError, "{}: `{}` is empty", r.where(key), key);
};
inline const auto positive_when_set = [](const Reader& r, const std::string& key, const auto& v) {
  LF_CHECK(!v || *v > 0, ConfigError, "{}: `{}` must be > 0 when set, got {}", r.where(key), key, v ? *v : 0);
};
// A key refused with its reason, and one accepted without effect with the reason (undeclared
// LLaMA-Factory keys get a generic one): the declarations every key group shares.
inline KeyDecl refused(std::string name, std::string reason) {
  KeyDecl d;
  d.name = std::move(name);
  d.policy = KeyPolicy::kRefused;
  d.note = std::move(reason);
  return d;
}
inline KeyDecl no_effect(std::string name, std::string why) {
  KeyDecl d;
  d.name = std::move(name);
  d.policy = KeyPolicy::kNoEffect;
  d.note = std::move(why);
  return d;
}

// Keys whose accepted values describe what lf-train always does: no field to set.
inline KeyDecl only_values(std::string name, std::vector<std::string> allowed, std::string note) {
  KeyDecl d;
  d.name = std::move(name);
  d.policy = KeyPolicy::kOnlyValues;
  d.note = std::move(note);
  d.type = "text";
  d.choices = std::move(allowed);
  d.check = [key = d.name, allowed = d.choices](const Reader& r, const JobPlan&) {
    if (r.has(key)) check_choice(r, key, r.text(key), allowed, "");
  };
  return d;
}

inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();
// torch.optim.AdamW's own checks, in its words ("Invalid beta parameter at index 1: 1.5"): lo <= v,
// and v < hi when hi is finite. A value torch refuses must not train here either.
inline auto torch_rule(const char* what, double lo, double hi) {
  return [=](const Reader& r, const std::string& key, double v) {
    LF_CHECK(v >= lo && (hi == kNoLimit || v < hi) && !std::isnan(v), ConfigError,
             "{}: `{}: {}`: expected {} <= {} {}; torch.optim.AdamW refuses it too (\"Invalid {}: {}\")", r.where(key),
             key, r.text(key), lo, key, hi == kNoLimit ? std::string() : fmt::format("< {}", hi), what, v);
  };
}
// [lo, hi] or [lo, hi) when !hi_closed.
inline auto in_range(double lo, double hi, bool hi_closed) {
  return [=](const Reader& r, const std::string& key, double v) {
    LF_CHECK(v >= lo && (hi_closed ? v <= hi : v < hi), ConfigError, "{}: `{}` must be in [{}, {}{}, got {}",
             r.where(key), key, lo, hi, hi_closed ? "]" : ")", v);
  };
}

// ---- builders

// Binds a key to one field of the plan: `implemented("cutoff_len", LF_FIELD(data, cutoff_len))`.
// `Ref` is a captureless lambda returning the field of a plan (the same accessor reads it,
// shows it and checks it, so a key cannot be read into one field and shown from another).
template <typename T>
class Implemented {
 public:
  using Ref = T& (*)(JobPlan&);
  Implemented(std::string name, Ref ref, const char* field, std::string note) : ref_(ref) {
    d_.name = std::move(name);
    d_.policy = KeyPolicy::kImplemented;
    d_.field = field;
    d_.note = std::move(note);
    d_.type = Type<T>::doc;
    d_.read = [ref, key = d_.name](const Reader& r, JobPlan& p) { read_value(r, key, ref(p)); };
    d_.show = [ref](const JobPlan& p) { return show_value(ref(const_cast<JobPlan&>(p))); };
  }

  Implemented&& choices(std::vector<std::string> allowed, std::string hint = "") && {
    static_assert(std::is_same_v<T, std::string>, "choices are for text keys");
    d_.choices = std::move(allowed);
    d_.choices_hint = std::move(hint);
    return std::move(*this).check([allowed = d_.choices, hint = d_.choices_hint](
                                      const Reader& r, const std::string& key, const std::string& v) {
      check_choice(r, key, v, allowed, hint);
    });
  }
  template <typename F>
  Implemented&& check(F rule) && {
    checks_.push_back([ref = ref_, key = d_.name, rule](const Reader& r, const JobPlan& p) {
      rule(r, key, ref(const_cast<JobPlan&>(p)));
    });
    return std::move(*this);
  }
  Implemented&& sample(std::string value, std::string context = "") && {
    d_.sample = std::move(value);
    d_.sample_context = std::move(context);
    return std::move(*this);
  }
  // What a run shows when the key acts (config_schema.h); `ranks`: the ranks it needs.
  Implemented&& observe(std::string observable, int ranks = 1) && {
    d_.observable = std::move(observable);
    d_.ranks = ranks;
    return std::move(*this);
  }
  Implemented&& differs(std::string why) && {
    d_.default_differs = std::move(why);
    return std::move(*this);
  }
  Implemented&& shown_default(std::string text) && {
    d_.default_text = std::move(text);
    return std::move(*this);
  }
  Implemented&& own() && {
    d_.own = true;
    return std::move(*this);
  }

  operator KeyDecl() && {
    JobPlan defaults;
    if (d_.sample.empty()) d_.sample = derived_sample(ref_(defaults), d_.choices);
    if (!checks_.empty())
      d_.check = [checks = std::move(checks_)](const Reader& r, const JobPlan& p) {
        for (const auto& f : checks) f(r, p);
      };
    return std::move(d_);
  }

 private:
  KeyDecl d_;
  Ref ref_;
  std::vector<std::function<void(const Reader&, const JobPlan&)>> checks_;
};

template <typename F>
auto implemented(std::string name, F ref, const char* field, std::string note = "") {
  using T = std::remove_reference_t<std::invoke_result_t<F, JobPlan&>>;
  return Implemented<T>(std::move(name), +ref, field, std::move(note));
}
// The field a key sets, and its name for docs: LF_FIELD(data, cutoff_len) is plan.data.cutoff_len.
#define LF_FIELD(section, member) [](JobPlan& p) -> auto& { return p.section.member; }, #section "." #member
#define LF_TOP_FIELD(member) [](JobPlan& p) -> auto& { return p.member; }, #member

}  // namespace lf::config::schema
