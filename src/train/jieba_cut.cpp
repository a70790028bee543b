// jieba 0.42.1's cut(sentence) (cut_all False, HMM True) for text whose segmentable runs hold no Chinese
// character (lf/train/similarity_metrics.h says what differs for those that do).
//
// jieba splits the text into runs of re_han_default ([\u4E00-\u9FD5a-zA-Z0-9+#&._%-]) and the rest. The rest
// is cut by re_skip_default ((\r\n|\s)): whitespace (and "\r\n") alone, every other character alone. A run goes
// through __cut_DAG: the dictionary's words found in it (for an ASCII run, only dict.txt's five ASCII words
// have a frequency), the route of highest log-probability, single characters gathered into a buffer that
// finalseg.cut splits with re_skip ([a-zA-Z0-9]+(?:\.\d+)?%?) when the buffer is not a word.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "lf/train/similarity_metrics.h"

namespace lf::train {
namespace {

// dict.txt's total frequency (jieba.dt.total = 60101967) and its words made only of ASCII characters.
const double kLogTotal = std::log(60101967.0);
const std::vector<std::pair<std::u32string, double>> kAsciiWords = {
    {U"AT&T", 3}, {U"c#", 3}, {U"C#", 3}, {U"c++", 3}, {U"C++", 3}};

bool is_cjk(char32_t c) { return c >= 0x4E00 && c <= 0x9FD5; }
bool is_ascii_alnum(char32_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool in_han_run(char32_t c) {
  return is_cjk(c) || is_ascii_alnum(c) || c == '+' || c == '#' || c == '&' || c == '.' || c == '_' || c == '%' || c == '-';
}

double word_freq(std::u32string_view w) {
  for (const auto& [word, freq] : kAsciiWords)
    if (word == w) return freq;
  return 0;
}

// finalseg.cut of a buffer without Chinese characters: re_skip's matches and the text between them.
void finalseg_cut(std::u32string_view buf, std::vector<std::u32string>& out) {
  size_t i = 0, gap = 0;
  while (i < buf.size()) {
    if (!is_ascii_alnum(buf[i])) {
      ++i;
      continue;
    }
    if (gap < i) out.emplace_back(buf.substr(gap, i - gap));
    size_t j = i;
    while (j < buf.size() && is_ascii_alnum(buf[j])) ++j;
    if (j + 1 < buf.size() && buf[j] == '.' && buf[j + 1] >= '0' && buf[j + 1] <= '9') {
      j += 1;
      while (j < buf.size() && buf[j] >= '0' && buf[j] <= '9') ++j;
    }
    if (j < buf.size() && buf[j] == '%') ++j;
    out.emplace_back(buf.substr(i, j - i));
    i = gap = j;
  }
  if (gap < buf.size()) out.emplace_back(buf.substr(gap));
}

void flush(std::u32string& buf, std::vector<std::u32string>& out) {
  if (buf.empty()) return;
  if (buf.size() == 1) {
    out.push_back(buf);
  } else if (word_freq(buf) == 0) {
    finalseg_cut(buf, out);
  } else {
    for (char32_t c : buf) out.emplace_back(1, c);
  }
  buf.clear();
}

// __cut_DAG over a run of ASCII characters of re_han_default.
void cut_dag(std::u32string_view s, std::vector<std::u32string>& out) {
  const size_t n = s.size();
  // route[idx] = max over the DAG's ends x of (log(freq(s[idx..x]) or 1) - logtotal + route[x+1], x).
  std::vector<std::pair<double, size_t>> route(n + 1, {0.0, 0});
  for (size_t k = n; k-- > 0;) {
    // get_DAG: the ends of the words starting at k; k alone only when none does.
    std::pair<double, size_t> best{-1e300, 0};
    bool word = false;
    for (const auto& [w, freq] : kAsciiWords) {
      if (s.substr(k, w.size()) != w) continue;
      const size_t x = k + w.size() - 1;
      const std::pair<double, size_t> cand{std::log(freq) - kLogTotal + route[x + 1].first, x};
      if (!word || cand > best) best = cand;
      word = true;
    }
    route[k] = word ? best : std::pair<double, size_t>{-kLogTotal + route[k + 1].first, k};
  }
  std::u32string buf;
  for (size_t x = 0; x < n;) {
    const size_t y = route[x].second + 1;
    if (y - x == 1) {
      buf += s[x];
    } else {
      flush(buf, out);
      out.emplace_back(s.substr(x, y - x));
    }
    x = y;
  }
  flush(buf, out);
}

// A run of re_han_default: ASCII through __cut_DAG; each Chinese character alone (jieba's dictionary and
// HMM are not reproduced: the documented difference).
void cut_block(std::u32string_view blk, std::vector<std::u32string>& out) {
  size_t i = 0;
  while (i < blk.size()) {
    if (is_cjk(blk[i])) {
      out.emplace_back(1, blk[i++]);
      continue;
    }
    size_t j = i;
    while (j < blk.size() && !is_cjk(blk[j])) ++j;
    cut_dag(blk.substr(i, j - i), out);
    i = j;
  }
}

}  // namespace

std::vector<std::u32string> jieba_cut(std::u32string_view text) {
  std::vector<std::u32string> out;
  size_t i = 0;
  while (i < text.size()) {
    if (in_han_run(text[i])) {
      size_t j = i;
      while (j < text.size() && in_han_run(text[j])) ++j;
      cut_block(text.substr(i, j - i), out);
      i = j;
    } else if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      out.emplace_back(U"\r\n");
      i += 2;
    } else {
      out.emplace_back(1, text[i++]);  // whitespace or any other character: alone
    }
  }
  return out;
}

}  // namespace lf::train
