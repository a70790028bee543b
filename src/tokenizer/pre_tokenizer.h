#pragma once
// tokenizer.json "pre_tokenizer" stages: Split (regex or string, every HF
// delimiter behaviour), ByteLevel, Metaspace, Sequence. They cut a normalized
// segment into pieces that the model encodes independently.
// Immutable; thread-safe.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace lf {

// Pieces of one segment: spans into buf. Stages that change text rebuild buf.
struct Pieces {
  std::string buf;
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // [begin, end)
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `first_segment`: the segment starts the text (Metaspace prepend_scheme "first").
  virtual void split(Pieces& pieces, bool first_segment) const = 0;
};

struct PreTokenizerInfo {
  bool byte_level = false;  // a ByteLevel stage is present: the model sees raw bytes
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, PreTokenizerInfo& info);

// GPT-2's own split (ByteLevel with use_regex, or a bare encoder.json/vocab.bpe).
std::unique_ptr<PreTokenizer> make_gpt2_pre_tokenizer();

}  // namespace lf
