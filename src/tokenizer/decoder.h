#pragma once
// tokenizer.json "decoder" stages (ByteLevel, Replace, ByteFallback, Fuse,
// Strip, Metaspace, Sequence), each a transform of the token-string list as in
// HF's decode_chain; the result is the concatenation. Immutable; thread-safe.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace lf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a JSON null (HF then joins tokens with spaces).
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);
std::unique_ptr<Decoder> make_byte_level_decoder();

}  // namespace lf
