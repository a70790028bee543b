#include "lf/tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "tokenizer_impl.h"
#include "utf8.h"

namespace lf {
namespace fs = std::filesystem;

namespace {

void encode_plain(const Tokenizer::Impl& m, std::string text, bool first, std::vector<int32_t>& ids) {
  if (text.empty()) return;
  Pieces pieces;
  pieces.buf = std::move(text);
  pieces.spans.emplace_back(0, static_cast<uint32_t>(pieces.buf.size()));
  if (m.pre_tokenizer) m.pre_tokenizer->split(pieces, first);
  for (const auto& [b, e] : pieces.spans)
    m.model->tokenize(std::string_view(pieces.buf.data() + b, e - b), ids);
}

}  // namespace

void Tokenizer::Impl::encode_into(std::string_view text, std::vector<int32_t>& ids) const {
  std::vector<Segment> segments;
  added.split(text, false, segments);
  bool first = true;
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      first = false;
      continue;
    }
    std::string s(text.substr(seg.begin, seg.end - seg.begin));
    if (normalizer) normalizer->normalize(s);
    if (added.has_normalized()) {
      std::vector<Segment> inner;
      added.split(s, true, inner);
      for (const Segment& in : inner) {
        if (in.id >= 0)
          ids.push_back(in.id);
        else
          encode_plain(*this, s.substr(in.begin, in.end - in.begin), first, ids);
        first = false;
      }
    } else {
      encode_plain(*this, std::move(s), first, ids);
    }
    first = false;
  }
}

std::optional<int32_t> Tokenizer::Impl::token_to_id(std::string_view token) const {
  for (const AddedToken& t : added.tokens())
    if (t.content == token) return t.id;
  const Vocab& v = model->vocab();
  if (auto it = v.find(token); it != v.end()) return it->second;
  return std::nullopt;
}

Tokenizer Tokenizer::load(const fs::path& path, TokenizerFlavor flavor) {
  std::shared_ptr<Impl> impl;
  fs::path dir = path;
  if (fs::is_regular_file(path)) {
    impl = load_tokenizer_json(path);
    dir = path.parent_path();
  } else if (fs::is_regular_file(path / "tokenizer.json")) {
    impl = load_tokenizer_json(path / "tokenizer.json");
  } else if (fs::is_regular_file(path / "encoder.json") && fs::is_regular_file(path / "vocab.bpe")) {
    impl = load_gpt2_files(path);
  } else {
    LF_THROW(ConfigError,
             "no tokenizer found in '{}': expected tokenizer.json (Hugging Face fast tokenizer) "
             "or encoder.json + vocab.bpe (GPT-2). lf-train never downloads tokenizers: point "
             "model_name_or_path (or --tokenizer) at a local model folder{}",
             path.string(), fs::exists(path) ? "" : " (the path does not exist)");
  }
  if (fs::is_regular_file(dir / "tokenizer_config.json"))
    load_tokenizer_config(dir / "tokenizer_config.json", *impl);
  // transformers reads chat_template.jinja over tokenizer_config.json's chat_template.
  if (fs::is_regular_file(dir / "chat_template.jinja")) {
    std::ifstream in(dir / "chat_template.jinja", std::ios::binary);
    impl->chat_template = std::string(std::istreambuf_iterator<char>(in), {});
    impl->has_chat_template = true;
    impl->fingerprint = fnv1a64(*impl->chat_template, impl->fingerprint);
  }
  if (flavor == TokenizerFlavor::kTransformers) {
    apply_transformers_flavor(*impl);
    impl->fingerprint = fnv1a64("transformers-flavor", impl->fingerprint);
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  size_t bad = utf8::find_invalid(text);
  LF_CHECK(bad == std::string_view::npos, ConfigError,
           "text to tokenize is not valid UTF-8 (first bad byte at offset {}); fix the data "
           "file's encoding (e.g. iconv -f latin1 -t utf-8)",
           bad);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special) ids = impl_->post_prefix;
  impl_->encode_into(text, ids);
  if (add_special) ids.insert(ids.end(), impl_->post_suffix.begin(), impl_->post_suffix.end());
  return ids;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(std::span<const std::string> texts,
                                                          bool add_special, int num_threads) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads = static_cast<int>(std::min<size_t>(num_threads, std::max<size_t>(1, texts.size() / 16)));
  if (num_threads <= 1) {
    for (size_t i = 0; i < texts.size(); ++i) out[i] = encode(texts[i], add_special);
    return out;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    constexpr size_t kChunk = 64;
    try {
      for (size_t b; (b = next.fetch_add(kChunk)) < texts.size();)
        for (size_t i = b; i < std::min(b + kChunk, texts.size()); ++i)
          out[i] = encode(texts[i], add_special);
    } catch (...) {
      std::lock_guard lock(error_mu);
      if (!error) error = std::current_exception();
      next = texts.size();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < num_threads; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= m.id_to_token.size()) continue;
    if (skip_special && m.special[id]) continue;
    tokens.push_back(m.id_to_token[id]);
  }
  if (!m.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  m.decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size()) return "";
  return impl_->id_to_token[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[id];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad_id; }
bool Tokenizer::add_bos_token() const { return impl_->add_bos_token; }
bool Tokenizer::has_chat_template() const { return impl_->has_chat_template; }
const std::optional<std::string>& Tokenizer::chat_template() const { return impl_->chat_template; }
uint64_t Tokenizer::fingerprint() const { return impl_->fingerprint; }
const fs::path& Tokenizer::source() const { return impl_->source; }

}  // namespace lf
