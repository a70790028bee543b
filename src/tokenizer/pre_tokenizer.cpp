#include "pre_tokenizer.h"

#include <nlohmann/json.hpp>
#include <algorithm>

#include "lf/common/error.h"
#include "regex.h"

namespace lf {
namespace {

constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

using Span = std::pair<uint32_t, uint32_t>;
struct Part {
  Span span;
  bool is_match;
};

// HF's NormalizedString::split for one piece: parts (offsets relative to the
// piece) with the behaviour applied; empty parts are dropped by the caller.
std::vector<Span> apply_behavior(std::vector<Part> parts, Behavior behavior) {
  std::vector<Span> out;
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Part& p : parts) out.push_back(p.span);
      break;
    case Behavior::kRemoved:
      for (const Part& p : parts)
        if (!p.is_match) out.push_back(p.span);
      break;
    case Behavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (p.is_match && !prev_match && !out.empty())
          out.back().second = p.span.second;
        else
          out.push_back(p.span);
        prev_match = p.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !prev_match && !out.empty())
          out.back().first = it->span.first;
        else
          out.push_back(it->span);
        prev_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case Behavior::kContiguous: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (p.is_match == prev_match && !out.empty())
          out.back().second = p.span.second;
        else
          out.push_back(p.span);
        prev_match = p.is_match;
      }
      break;
    }
  }
  return out;
}

class RegexSplit : public PreTokenizer {
 public:
  RegexSplit(const std::string& pattern, Behavior behavior, bool invert)
      : regex_(pattern), behavior_(behavior), invert_(invert) {}
  void split(Pieces& pieces, bool) const override {
    thread_local std::vector<Span> matches;
    std::vector<Span> out;
    out.reserve(pieces.spans.size() * 4);
    for (const Span& span : pieces.spans) {
      std::string_view s(pieces.buf.data() + span.first, span.second - span.first);
      matches.clear();
      regex_.find_all(s, matches);
      if (behavior_ == Behavior::kIsolated && !invert_) {
        // Fast path of the common case: gaps and matches, in order.
        uint32_t prev = 0;
        for (const Span& m : matches) {
          if (m.first > prev) out.emplace_back(span.first + prev, span.first + m.first);
          if (m.second > m.first) out.emplace_back(span.first + m.first, span.first + m.second);
          prev = m.second;
        }
        if (prev < s.size()) out.emplace_back(span.first + prev, span.second);
        continue;
      }
      std::vector<Part> parts;
      uint32_t prev = 0;
      for (const Span& m : matches) {
        if (m.first != prev) parts.push_back({{prev, m.first}, invert_});
        parts.push_back({m, !invert_});
        prev = m.second;
      }
      if (prev != s.size()) parts.push_back({{prev, static_cast<uint32_t>(s.size())}, invert_});
      for (Span p : apply_behavior(std::move(parts), behavior_))
        if (p.second > p.first) out.emplace_back(span.first + p.first, span.first + p.second);
    }
    pieces.spans = std::move(out);
  }

 private:
  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

// Rebuilds buf from the spans with a per-piece text transform.
template <typename F>
void rewrite_pieces(Pieces& pieces, F&& transform) {
  std::string buf;
  std::vector<Span> spans;
  for (const Span& span : pieces.spans) {
    std::string piece = transform(
        std::string_view(pieces.buf.data() + span.first, span.second - span.first), spans.empty());
    uint32_t b = static_cast<uint32_t>(buf.size());
    buf += piece;
    spans.emplace_back(b, static_cast<uint32_t>(buf.size()));
  }
  pieces.buf = std::move(buf);
  pieces.spans = std::move(spans);
}

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) split_ = std::make_unique<RegexSplit>(kGpt2Pattern, Behavior::kIsolated, false);
  }
  void split(Pieces& pieces, bool first) const override {
    if (add_prefix_space_) {
      rewrite_pieces(pieces, [](std::string_view s, bool) {
        return s.starts_with(' ') ? std::string(s) : " " + std::string(s);
      });
    }
    if (split_) split_->split(pieces, first);
    // The byte -> char mapping itself happens in the model (BpeOptions::byte_level).
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<RegexSplit> split_;
};

class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, std::string scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(std::move(scheme)), split_(split) {}
  void split(Pieces& pieces, bool first_segment) const override {
    rewrite_pieces(pieces, [&](std::string_view s, bool first_piece) {
      std::string out;
      for (char c : s) {
        if (c == ' ')
          out += replacement_;
        else
          out += c;
      }
      bool prepend = scheme_ == "always" || (scheme_ == "first" && first_segment && first_piece);
      if (prepend && !std::string_view(out).starts_with(replacement_)) out.insert(0, replacement_);
      return out;
    });
    if (!split_) return;
    std::vector<Span> out;
    for (const Span& span : pieces.spans) {
      std::string_view s(pieces.buf.data() + span.first, span.second - span.first);
      std::vector<Part> parts;
      uint32_t prev = 0;
      for (size_t hit = s.find(replacement_); hit != std::string_view::npos;
           hit = s.find(replacement_, hit + replacement_.size())) {
        uint32_t h = static_cast<uint32_t>(hit);
        if (h != prev) parts.push_back({{prev, h}, false});
        parts.push_back({{h, h + static_cast<uint32_t>(replacement_.size())}, true});
        prev = h + static_cast<uint32_t>(replacement_.size());
      }
      if (prev != s.size()) parts.push_back({{prev, static_cast<uint32_t>(s.size())}, false});
      for (Span p : apply_behavior(std::move(parts), Behavior::kMergedWithNext))
        if (p.second > p.first) out.emplace_back(span.first + p.first, span.first + p.second);
    }
    pieces.spans = std::move(out);
  }

 private:
  std::string replacement_, scheme_;
  bool split_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> items) : items_(std::move(items)) {}
  void split(Pieces& pieces, bool first) const override {
    for (const auto& p : items_) p->split(pieces, first);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

Behavior parse_behavior(const std::string& name) {
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  LF_THROW(ConfigError, "tokenizer.json: unknown Split behavior '{}'", name);
}

}  // namespace

std::unique_ptr<PreTokenizer> make_gpt2_pre_tokenizer() {
  return std::make_unique<ByteLevelPre>(false, true);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, PreTokenizerInfo& info) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "Split") {
    const auto& pat = j.at("pattern");
    std::string regex = pat.contains("Regex") ? pat.at("Regex").get<std::string>()
                                              : Regex::escape(pat.at("String").get<std::string>());
    return std::make_unique<RegexSplit>(regex, parse_behavior(j.value("behavior", "Isolated")),
                                        j.value("invert", false));
  }
  if (type == "ByteLevel") {
    info.byte_level = true;
    return std::make_unique<ByteLevelPre>(j.value("add_prefix_space", false),
                                          j.value("use_regex", true));
  }
  if (type == "Digits") {
    // HF splits on char::is_numeric (Nd, Nl, No), each digit or each run.
    return std::make_unique<RegexSplit>(j.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+",
                                        Behavior::kIsolated, false);
  }
  if (type == "Metaspace") {
    std::string scheme = j.value("prepend_scheme", "");
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    return std::make_unique<Metaspace>(j.value("replacement", "\u2581"), scheme,
                                       j.value("split", true));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> items;
    for (const auto& p : j.at("pretokenizers"))
      if (auto made = make_pre_tokenizer(p, info)) items.push_back(std::move(made));
    return std::make_unique<SequencePre>(std::move(items));
  }
  LF_THROW(ConfigError,
           "tokenizer.json uses pre_tokenizer type '{}', which lf-train does not support "
           "(supported: Split, ByteLevel, Metaspace, Digits, Sequence)",
           type);
}

}  // namespace lf
