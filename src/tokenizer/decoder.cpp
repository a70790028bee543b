#include "decoder.h"

#include <nlohmann/json.hpp>

#include "byte_level.h"
#include "lf/common/error.h"
#include "utf8.h"

namespace lf {
namespace {

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      // A token with a char outside the byte map (an added token) is kept as is.
      if (auto raw = byte_level::unmap(t))
        bytes += *raw;
      else
        bytes += t;
    }
    tokens.assign(1, utf8::from_utf8_lossy(bytes));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::string out;
      size_t pos = 0;
      for (size_t hit; (hit = t.find(from_, pos)) != std::string::npos; pos = hit + from_.size()) {
        out.append(t, pos, hit - pos);
        out += to_;
      }
      out.append(t, pos);
      t = std::move(out);
    }
  }

 private:
  std::string from_, to_;
};

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8::is_valid(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
        int v = 0;
        bool ok = true;
        for (int k = 3; k < 5; ++k) {
          char c = t[k];
          int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
          if (d < 0) ok = false;
          v = v * 16 + d;
        }
        if (ok) {
          pending.push_back(static_cast<char>(v));
          continue;
        }
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, cp)
      for (size_t i = 0; i < t.size();) {
        size_t at = i;
        chars.emplace_back(at, utf8::next(t, i));
      }
      size_t start_cut = 0;
      for (size_t i = 0; i < start_ && i < chars.size(); ++i) {
        if (chars[i].second != content_) break;
        start_cut = i + 1;
      }
      size_t stop_cut = chars.size();
      for (size_t i = 0; i < stop_ && i < chars.size(); ++i) {
        size_t index = chars.size() - i - 1;
        if (chars[index].second != content_) break;
        stop_cut = index;
      }
      if (stop_cut <= start_cut) {
        t.clear();
        continue;
      }
      size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
      size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepend)
      : replacement_(std::move(replacement)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string out;
      size_t pos = 0;
      for (size_t hit; (hit = t.find(replacement_, pos)) != std::string::npos;
           pos = hit + replacement_.size()) {
        out.append(t, pos, hit - pos);
        if (!(i == 0 && prepend_)) out += ' ';
      }
      out.append(t, pos);
      t = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepend_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> items) : items_(std::move(items)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

}  // namespace

std::unique_ptr<Decoder> make_byte_level_decoder() { return std::make_unique<ByteLevelDecoder>(); }

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "Replace") {
    const auto& pat = j.at("pattern");
    LF_CHECK(pat.contains("String"), ConfigError,
             "tokenizer.json: Replace decoder with a Regex pattern is not supported");
    return std::make_unique<ReplaceDecoder>(pat.at("String").get<std::string>(),
                                            j.at("content").get<std::string>());
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    std::string content = j.value("content", " ");
    size_t i = 0;
    char32_t cp = content.empty() ? U' ' : utf8::next(content, i);
    return std::make_unique<StripDecoder>(cp, j.value("start", 0), j.value("stop", 0));
  }
  if (type == "Metaspace") {
    std::string scheme = j.value("prepend_scheme", "");
    bool prepend = scheme.empty() ? j.value("add_prefix_space", true) : scheme != "never";
    return std::make_unique<MetaspaceDecoder>(j.value("replacement", "\u2581"), prepend);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> items;
    for (const auto& d : j.at("decoders"))
      if (auto made = make_decoder(d)) items.push_back(std::move(made));
    return std::make_unique<SequenceDecoder>(std::move(items));
  }
  LF_THROW(ConfigError,
           "tokenizer.json uses decoder type '{}', which lf-train does not support "
           "(supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)",
           type);
}

}  // namespace lf
