// LLaMA-Factory's ComputeSimilarity (lf/train/similarity_metrics.h): nltk's sentence BLEU with method3,
// rouge_chinese's Rouge, Python's round and numpy's mean, each as those libraries compute it.
#include "lf/train/similarity_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

namespace lf::train {
namespace {

bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.split() (runs of whitespace, none empty).
std::vector<std::u32string> py_split(std::u32string_view s) {
  std::vector<std::u32string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && py_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !py_space(s[j])) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::u32string join(const std::vector<std::u32string>& parts, std::u32string_view sep) {
  std::u32string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

// Python's math.fsum (Shewchuk's partials, correctly rounded) of a few finite terms.
double fsum(const std::vector<double>& xs) {
  std::vector<double> partials;
  for (double x : xs) {
    size_t i = 0;
    for (double y : partials) {
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y, lo = y - (hi - x);
      if (lo != 0.0) partials[i++] = lo;
      x = hi;
    }
    partials.resize(i);
    partials.push_back(x);
  }
  if (partials.empty()) return 0.0;
  size_t n = partials.size();
  double hi = partials[--n], lo = 0;
  while (n > 0) {
    const double x = hi, y = partials[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo != 0.0) break;
  }
  // Half-way cases: round as the exact sum would (Python's math_fsum).
  if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
    const double y = lo * 2, x = hi + y;
    if (y == x - hi) hi = x;
  }
  return hi;
}

// modified_precision's (clipped matches, max(1, hypothesis n-grams)) against one reference.
std::pair<int64_t, int64_t> modified_precision(std::u32string_view ref, std::u32string_view hyp, size_t n) {
  std::map<std::u32string_view, int64_t> counts, ref_counts;
  for (size_t i = 0; i + n <= hyp.size(); ++i) ++counts[hyp.substr(i, n)];
  for (size_t i = 0; i + n <= ref.size(); ++i) ++ref_counts[ref.substr(i, n)];
  int64_t clipped = 0, total = 0;
  for (const auto& [g, c] : counts) {
    const auto it = ref_counts.find(g);
    clipped += std::min(c, it == ref_counts.end() ? int64_t{0} : it->second);
    total += c;
  }
  return {clipped, std::max<int64_t>(1, total)};
}

// rouge_chinese's Rouge.cut_sent: re.sub(r'(A)(B)', r'\1\n\2') scanned left to right, `head` characters of A.
std::u32string split_after(std::u32string_view s, size_t head, const auto& a, const auto& b) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    if (i + head < s.size() && a(s.substr(i, head)) && b(s[i + head])) {
      out += s.substr(i, head);
      out += U'\n';
      out += s[i + head];
      i += head + 1;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::vector<std::u32string> cut_sent(std::u32string para) {
  const auto stop = [](char32_t c) { return c == U'。' || c == U'！' || c == U'？' || c == U'?'; };
  const auto not_quote = [](char32_t c) { return c != U'”' && c != U'’'; };
  const auto all_of = [](char32_t want) {
    return [want](std::u32string_view v) { return std::all_of(v.begin(), v.end(), [want](char32_t c) { return c == want; }); };
  };
  para = split_after(para, 1, [&](std::u32string_view v) { return stop(v[0]); }, not_quote);
  para = split_after(para, 6, all_of(U'.'), not_quote);
  para = split_after(para, 2, all_of(U'…'), not_quote);
  para = split_after(para, 2, [&](std::u32string_view v) { return stop(v[0]) && !not_quote(v[1]); },
                     [&](char32_t c) { return c != U'，' && !stop(c); });
  while (!para.empty() && py_space(para.back())) para.pop_back();  // rstrip()
  std::vector<std::u32string> lines;
  size_t start = 0;
  for (size_t i = 0; i <= para.size(); ++i)
    if (i == para.size() || para[i] == U'\n') {
      lines.push_back(para.substr(start, i - start));
      start = i + 1;
    }
  return lines;
}

// _get_scores' words: each non-empty sentence re-joined by single spaces, all split on " ".
std::vector<std::u32string> rouge_words(std::u32string_view text) {
  std::vector<std::u32string> words;
  for (const auto& s : cut_sent(std::u32string(text))) {
    if (s.empty()) continue;
    const auto line = join(py_split(s), U" ");
    size_t start = 0;
    for (size_t i = 0; i <= line.size(); ++i)
      if (i == line.size() || line[i] == U' ') {
        words.push_back(line.substr(start, i - start));
        start = i + 1;
      }
  }
  return words;
}

double f_score(double p, double r) { return 2.0 * ((p * r) / (p + r + 1e-8)); }

double rouge_n(const std::vector<std::u32string>& hyp, const std::vector<std::u32string>& ref, size_t n) {
  const auto grams = [n](const std::vector<std::u32string>& w) {
    std::set<std::vector<std::u32string>> g;
    for (size_t i = 0; i + n <= w.size(); ++i) g.emplace(w.begin() + static_cast<std::ptrdiff_t>(i), w.begin() + static_cast<std::ptrdiff_t>(i + n));
    return g;
  };
  const auto h = grams(hyp), r = grams(ref);
  size_t overlap = 0;
  for (const auto& g : h) overlap += r.count(g);
  const double p = h.empty() ? 0.0 : static_cast<double>(overlap) / static_cast<double>(h.size());
  const double rc = r.empty() ? 0.0 : static_cast<double>(overlap) / static_cast<double>(r.size());
  return f_score(p, rc);
}

double rouge_l(const std::vector<std::u32string>& hyp, const std::vector<std::u32string>& ref) {
  const size_t m = ref.size(), n = hyp.size();
  std::vector<size_t> prev(n + 1, 0), cur(n + 1, 0);
  for (size_t i = 1; i <= m; ++i) {
    for (size_t j = 1; j <= n; ++j) cur[j] = ref[i - 1] == hyp[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    std::swap(prev, cur);
  }
  const double llcs = static_cast<double>(prev[n]);
  return f_score(llcs / static_cast<double>(n), llcs / static_cast<double>(m));
}

double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = -0.0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (size_t j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

}  // namespace

std::u32string utf8_code_points(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cb = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = (cb >> 6) == 2;
      c = (c << 6) | (cb & 0x3F);
    }
    out += ok ? c : U'\uFFFD';
    i += ok ? static_cast<size_t>(len) : 1;
  }
  return out;
}

std::string utf8_encode(std::u32string_view text) {
  std::string out;
  for (char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

double sentence_bleu4(std::u32string_view reference, std::u32string_view hypothesis) {
  std::pair<int64_t, int64_t> p[4];
  for (size_t n = 1; n <= 4; ++n) p[n - 1] = modified_precision(reference, hypothesis, n);
  if (p[0].first == 0) return 0.0;
  const auto hyp_len = static_cast<int64_t>(hypothesis.size()), ref_len = static_cast<int64_t>(reference.size());
  const double bp = hyp_len > ref_len ? 1.0 : std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(hyp_len));
  std::vector<double> terms;
  int64_t k = 1;  // method3: the i-th zero precision becomes 1 / (2^i x its denominator)
  for (const auto& [num, den] : p) {
    const double pi = num == 0 ? 1.0 / static_cast<double>((int64_t{1} << k++) * den)
                               : static_cast<double>(num) / static_cast<double>(den);
    terms.push_back(0.25 * std::log(pi));
  }
  return bp * std::exp(fsum(terms));
}

RougeScores rouge_scores(std::u32string_view hypothesis, std::u32string_view reference) {
  const auto hyp = rouge_words(hypothesis), ref = rouge_words(reference);
  return {rouge_n(hyp, ref, 1), rouge_n(hyp, ref, 2), rouge_l(hyp, ref)};
}

double round4(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", x);  // glibc: the exact binary value, rounded half-even
  return std::strtod(buf, nullptr);
}

std::map<std::string, double> similarity_scores(std::string_view prediction, std::string_view label) {
  const auto pred = utf8_code_points(prediction), lab = utf8_code_points(label);
  const auto hyp_words = jieba_cut(pred), ref_words = jieba_cut(lab);
  const auto hyp = join(hyp_words, U" "), ref = join(ref_words, U" ");
  RougeScores r;
  if (!py_split(hyp).empty() && !py_split(ref).empty()) r = rouge_scores(hyp, ref);
  return {{"rouge-1", round4(r.rouge1 * 100)}, {"rouge-2", round4(r.rouge2 * 100)},
          {"rouge-l", round4(r.rougel * 100)}, {"bleu-4", round4(sentence_bleu4(lab, pred) * 100)}};
}

double numpy_mean(const std::vector<double>& values) {
  if (values.empty()) return std::nan("");
  return pairwise_sum(values.data(), values.size()) / static_cast<double>(values.size());
}

std::map<std::string, double> compute_similarity(const std::vector<std::string>& predictions,
                                                 const std::vector<std::string>& labels) {
  std::map<std::string, std::vector<double>> per_key;
  for (size_t i = 0; i < predictions.size() && i < labels.size(); ++i)
    for (const auto& [k, v] : similarity_scores(predictions[i], labels[i])) per_key[k].push_back(v);
  std::map<std::string, double> out;
  for (const auto& [k, v] : per_key) out[k] = numpy_mean(v);
  return out;
}

}  // namespace lf::train
