#pragma once
// tokenizer.json "normalizer" stages (NFC/NFKC/NFD/NFKD through ICU, Prepend,
// Replace, Lowercase, Strip, Sequence). Applied to each text segment between
// added tokens, as HF does. Immutable; thread-safe.
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace lf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

// nullptr for a JSON null; ConfigError naming an unsupported type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);

}  // namespace lf
