#pragma once
// Added tokens (tokenizer.json "added_tokens"): matched in the text before any
// normalization or splitting, leftmost-longest like HF's Aho-Corasick pass,
// with the lstrip/rstrip/single_word flags. Tokens flagged `normalized` are
// matched in a second pass on normalized text. Immutable; thread-safe.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lf {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A slice of the text: an added token (id >= 0) or plain text (id == -1).
struct Segment {
  uint32_t begin;
  uint32_t end;
  int32_t id;
};

class AddedVocab {
 public:
  AddedVocab() = default;
  explicit AddedVocab(std::vector<AddedToken> tokens);

  // Splits `text` on the tokens whose `normalized` flag equals `normalized_pass`.
  void split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const;
  bool has_normalized() const { return !normalized_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Matcher {
    std::array<bool, 256> first_byte{};
    // Candidate token indices per first byte, longest content first.
    std::array<std::vector<int32_t>, 256> by_first;
    bool empty() const { return count == 0; }
    size_t count = 0;
  };
  void build(Matcher& m, bool normalized);

  std::vector<AddedToken> tokens_;
  Matcher raw_;
  Matcher normalized_;
};

}  // namespace lf
