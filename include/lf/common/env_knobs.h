#pragma once
// Typed reads of lf-train's own environment knobs (the registry: env_knob_table.h).
//
//   const auto level = lf::knob_string("LF_LOG_LEVEL");   // "info" when unset
//   const auto port = lf::knob_int("LF_RDZV_PORT");        // nullopt when unset (no default)
//
// The name is checked at compile time: a name that is not in the table, or a
// knob read with the wrong accessor (knob_int on a choice), does not compile
// (the error names detail::unregistered_lf_knob_add_it_to_env_knob_table_h or
// detail::knob_read_with_the_wrong_accessor). A set value that does not parse
// is a ConfigError naming the variable, what was expected and what was seen.
// An unset or empty variable reads as the registered default, or nullopt when
// the knob has none. Thread-safe (getenv only); nothing is cached.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lf/common/env_knob_table.h"

namespace lf {

namespace detail {
// Never defined, never called at run time: naming them in a constant expression is the
// compile error a wrong read gets.
const EnvKnob& unregistered_lf_knob_add_it_to_env_knob_table_h();
const EnvKnob& knob_read_with_the_wrong_accessor();

consteval const EnvKnob& registered_knob(std::string_view name, unsigned accepted_types) {
  for (const EnvKnob& k : kEnvKnobs)
    if (k.name == name)
      return (accepted_types & (1u << static_cast<unsigned>(k.type))) ? k : knob_read_with_the_wrong_accessor();
  return unregistered_lf_knob_add_it_to_env_knob_table_h();
}

template <KnobType... Types>
inline constexpr unsigned kTypeMask = ((1u << static_cast<unsigned>(Types)) | ... | 0u);
}  // namespace detail

// A registered knob of one of `Types`; only constructible from a literal name.
template <KnobType... Types>
struct KnobRef {
  consteval KnobRef(const char* name) : knob(&detail::registered_knob(name, detail::kTypeMask<Types...>)) {}
  const EnvKnob* knob;
};

using AnyKnob = KnobRef<KnobType::kString, KnobType::kPath, KnobType::kInt, KnobType::kSeconds, KnobType::kNumber,
                        KnobType::kBool, KnobType::kChoice>;

// Text knobs (string, path, choice: a choice is checked against its values).
std::optional<std::string> knob_string(KnobRef<KnobType::kString, KnobType::kPath, KnobType::kChoice> k);
std::optional<int64_t> knob_int(KnobRef<KnobType::kInt> k);
// Numbers; seconds must be >= 0.
std::optional<double> knob_number(KnobRef<KnobType::kNumber, KnobType::kSeconds> k);
// 0 or 1.
std::optional<bool> knob_bool(KnobRef<KnobType::kBool> k);
// Whether the variable is set to a non-empty value (whatever the default).
bool knob_is_set(AnyKnob k);
// The name, checked: for code that sets a knob for a child (the agent's worker environment).
consteval const char* knob_name(AnyKnob k) { return k.knob->name.data(); }

// The whole registry, in table order, and a lookup by name at run time (nullptr: not a knob).
std::span<const EnvKnob> env_knobs();
const EnvKnob* find_env_knob(std::string_view name);
const char* knob_type_name(KnobType t);  // "integer", "seconds", "0|1", ...
// The registry as a Markdown table (the README's section: no current values, so it does
// not depend on the environment) and as plain text for a terminal (`lf-train env`), which
// adds the current value of every knob that is set.
std::string env_knobs_markdown();
std::string env_knobs_text();

}  // namespace lf
