// Python's str methods on UTF-8 text for the Jinja renderer (jinja_text.h).
#include "jinja_text.h"

#include <algorithm>
#include <cctype>

namespace lf::jinja {
namespace {

bool py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

}  // namespace

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  const auto cps = code_points(s);
  std::vector<std::string> set;
  if (chars) set = code_points(*chars);
  auto strip_it = [&](const std::string& c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end()
                 : c.size() == 1 && py_space(static_cast<unsigned char>(c[0]));
  };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_it(cps[b])) ++b;
  if (right) while (e > b && strip_it(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

std::string ascii_upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (auto& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    const bool letter = std::isalpha(u) != 0;
    if (letter) c = static_cast<char>(prev_letter ? std::tolower(u) : std::toupper(u));
    prev_letter = letter || u >= 0x80;
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> out;
  if (!sep) {  // whitespace runs, empty pieces dropped
    std::vector<std::pair<size_t, size_t>> words;
    for (size_t k = 0; k < s.size();) {
      while (k < s.size() && py_space(static_cast<unsigned char>(s[k]))) ++k;
      if (k == s.size()) break;
      size_t e = k;
      while (e < s.size() && !py_space(static_cast<unsigned char>(s[e]))) ++e;
      words.emplace_back(k, e);
      k = e;
    }
    if (maxsplit < 0 || static_cast<int64_t>(words.size()) <= maxsplit + 1) {
      for (auto [b, e] : words) out.push_back(s.substr(b, e - b));
      return out;
    }
    const size_t m = static_cast<size_t>(maxsplit);
    if (!from_right) {
      for (size_t k = 0; k < m; ++k) out.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      out.push_back(py_strip(s.substr(words[m].first), std::nullopt, false, true));
    } else {
      const size_t keep = words.size() - m;
      out.push_back(py_strip(s.substr(0, words[keep - 1].second), std::nullopt, true, false));
      for (size_t k = keep; k < words.size(); ++k) out.push_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
    return out;
  }
  std::vector<size_t> at;
  for (size_t p = s.find(*sep); p != std::string::npos && !sep->empty(); p = s.find(*sep, p + sep->size())) at.push_back(p);
  if (maxsplit >= 0 && static_cast<int64_t>(at.size()) > maxsplit) {
    if (from_right) at.erase(at.begin(), at.end() - maxsplit);
    else at.resize(static_cast<size_t>(maxsplit));
  }
  size_t from = 0;
  for (size_t p : at) {
    out.push_back(s.substr(from, p - from));
    from = p + sep->size();
  }
  out.push_back(s.substr(from));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  if (old.empty()) return s;
  std::string out;
  size_t from = 0;
  int64_t done = 0;
  for (size_t p = s.find(old); p != std::string::npos && (count < 0 || done < count); p = s.find(old, from), ++done) {
    out.append(s, from, p - from);
    out += with;
    from = p + old.size();
  }
  out.append(s, from);
  return out;
}

}  // namespace lf::jinja
