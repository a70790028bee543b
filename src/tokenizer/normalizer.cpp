#include "normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "lf/common/error.h"

namespace lf {
namespace {

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(const std::string& form) {
    UErrorCode err = U_ZERO_ERROR;
    if (form == "NFC") norm_ = icu::Normalizer2::getNFCInstance(err);
    if (form == "NFD") norm_ = icu::Normalizer2::getNFDInstance(err);
    if (form == "NFKC") norm_ = icu::Normalizer2::getNFKCInstance(err);
    if (form == "NFKD") norm_ = icu::Normalizer2::getNFKDInstance(err);
    LF_CHECK(U_SUCCESS(err) && norm_ != nullptr, ConfigError,
             "ICU has no {} normalizer: {}", form, u_errorName(err));
  }
  void normalize(std::string& s) const override {
    // ASCII is invariant under every normalization form.
    if (is_ascii(s)) return;
    UErrorCode err = U_ZERO_ERROR;
    if (norm_->isNormalizedUTF8(s, err) && U_SUCCESS(err)) return;
    err = U_ZERO_ERROR;
    std::string out;
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(s.size()));
    norm_->normalizeUTF8(0, s, sink, nullptr, err);
    LF_CHECK(U_SUCCESS(err), ConfigError, "ICU normalization failed: {}", u_errorName(err));
    s = std::move(out);
  }

 private:
  const icu::Normalizer2* norm_ = nullptr;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

class Replace : public Normalizer {
 public:
  Replace(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void normalize(std::string& s) const override {
    if (from_.empty() || s.find(from_) == std::string::npos) return;
    std::string out;
    out.reserve(s.size() + s.size() / 2);
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from_, pos)) != std::string::npos; pos = hit + from_.size()) {
      out.append(s, pos, hit - pos);
      out += to_;
    }
    out.append(s, pos);
    s = std::move(out);
  }

 private:
  std::string from_, to_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
    u.toLower(icu::Locale::getRoot());
    s.clear();
    u.toUTF8String(s);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    // ASCII whitespace only; HF strips Unicode whitespace, which these files never rely on.
    auto ws = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
    size_t b = 0, e = s.size();
    if (left_)
      while (b < e && ws(s[b])) ++b;
    if (right_)
      while (e > b && ws(s[e - 1])) --e;
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  void normalize(std::string& s) const override {
    for (const auto& n : items_) n->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeNormalizer>(type);
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "Replace") {
    const auto& pat = j.at("pattern");
    LF_CHECK(pat.contains("String"), ConfigError,
             "tokenizer.json: Replace normalizer with a Regex pattern is not supported "
             "(only {{\"String\": ...}} patterns)");
    return std::make_unique<Replace>(pat.at("String").get<std::string>(),
                                     j.at("content").get<std::string>());
  }
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> items;
    for (const auto& n : j.at("normalizers"))
      if (auto made = make_normalizer(n)) items.push_back(std::move(made));
    return std::make_unique<Sequence>(std::move(items));
  }
  LF_THROW(ConfigError,
           "tokenizer.json uses normalizer type '{}', which lf-train does not support "
           "(supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, Lowercase, Strip, Sequence)",
           type);
}

}  // namespace lf
