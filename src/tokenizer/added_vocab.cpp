#include "added_vocab.h"

#include <algorithm>
#include <cstring>

#include "utf8.h"

namespace lf {
namespace {

bool is_space_byte(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// HF's single_word test uses char::is_alphanumeric or '_'; ASCII plus any
// non-ASCII code point as "word" is close enough for the files we load.
bool is_word_cp(char32_t c) {
  return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c >= 0x80;
}

char32_t last_cp(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  if (i > 0) --i;
  size_t k = i;
  return utf8::next(s, k);
}

}  // namespace

AddedVocab::AddedVocab(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  build(raw_, false);
  build(normalized_, true);
}

void AddedVocab::build(Matcher& m, bool normalized) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    if (t.content.empty() || t.normalized != normalized) continue;
    unsigned char c = static_cast<unsigned char>(t.content[0]);
    m.first_byte[c] = true;
    m.by_first[c].push_back(static_cast<int32_t>(i));
    ++m.count;
  }
  for (auto& list : m.by_first) {
    std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

void AddedVocab::split(std::string_view text, bool normalized_pass,
                       std::vector<Segment>& out) const {
  const Matcher& m = normalized_pass ? normalized_ : raw_;
  const uint32_t n = static_cast<uint32_t>(text.size());
  if (m.empty()) {
    if (n > 0) out.push_back({0, n, -1});
    return;
  }
  uint32_t start_offset = 0;  // end of the previous emitted token
  uint32_t i = 0;
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (!m.first_byte[c]) {
      ++i;
      continue;
    }
    const AddedToken* hit = nullptr;
    for (int32_t idx : m.by_first[c]) {
      const AddedToken& t = tokens_[idx];
      if (t.content.size() <= n - i && std::memcmp(text.data() + i, t.content.data(), t.content.size()) == 0) {
        hit = &t;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    uint32_t start = i, stop = i + static_cast<uint32_t>(hit->content.size());
    if (hit->single_word) {
      bool start_ok = start == 0 || !is_word_cp(last_cp(text.substr(0, start)));
      size_t k = stop;
      bool stop_ok = stop == n || !is_word_cp(utf8::next(text, k));
      if (!start_ok || !stop_ok) {
        ++i;
        continue;
      }
    }
    if (hit->lstrip) {
      uint32_t s = start;
      while (s > start_offset && is_space_byte(text[s - 1])) --s;
      start = s;
    }
    if (hit->rstrip)
      while (stop < n && is_space_byte(text[stop])) ++stop;
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, hit->id});
    start_offset = stop;
    i = stop;
  }
  if (start_offset < n) out.push_back({start_offset, n, -1});
}

}  // namespace lf
