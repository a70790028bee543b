// Reads tokenizer.json / tokenizer_config.json / GPT-2 encoder.json+vocab.bpe
// into a Tokenizer::Impl. Every failure names the file and what to try.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "tokenizer_impl.h"

namespace lf {
namespace {

using nlohmann::json;

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  LF_CHECK(in.good(), ConfigError, "cannot read {}: {}", file.string(), std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse_json(const std::string& text, const std::filesystem::path& file) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    LF_THROW(ConfigError, "{} is not valid JSON: {} (byte {}); re-download or re-export it",
             file.string(), e.what(), e.byte);
  }
}

std::optional<std::string> token_content(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content")) return j.at("content").get<std::string>();
  return std::nullopt;
}

void parse_post_processor(const json& j, const json& file_json, Tokenizer::Impl& impl,
                          const std::filesystem::path& file) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "TemplateProcessing") {
    const json& specials = j.value("special_tokens", json::object());
    bool after_sequence = false;
    for (const json& item : j.at("single")) {
      if (item.contains("Sequence")) {
        after_sequence = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      LF_CHECK(specials.contains(name), ConfigError,
               "{}: TemplateProcessing names special token '{}' but does not define it",
               file.string(), name);
      for (const json& id : specials.at(name).at("ids"))
        (after_sequence ? impl.post_suffix : impl.post_prefix).push_back(id.get<int32_t>());
    }
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    impl.post_prefix.push_back(j.at("cls").at(1).get<int32_t>());
    impl.post_suffix.push_back(j.at("sep").at(1).get<int32_t>());
    return;
  }
  if (type == "Sequence") {
    for (const json& p : j.at("processors")) parse_post_processor(p, file_json, impl, file);
    return;
  }
  LF_THROW(ConfigError,
           "{} uses post_processor type '{}', which lf-train does not support "
           "(supported: TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence)",
           file.string(), type);
}

void finish_ids(Tokenizer::Impl& impl) {
  size_t size = 0;
  for (const auto& [tok, id] : impl.model->vocab()) size = std::max(size, static_cast<size_t>(id) + 1);
  for (const auto& t : impl.added.tokens()) size = std::max(size, static_cast<size_t>(t.id) + 1);
  impl.id_to_token.assign(size, "");
  impl.special.assign(size, 0);
  for (const auto& [tok, id] : impl.model->vocab()) impl.id_to_token[id] = tok;
  for (const auto& t : impl.added.tokens()) {
    impl.id_to_token[t.id] = t.content;
    impl.special[t.id] = t.special ? 1 : 0;
  }
}

}  // namespace

std::shared_ptr<Tokenizer::Impl> load_tokenizer_json(const std::filesystem::path& file) {
  const std::string text = read_file(file);
  json root = parse_json(text, file);
  auto impl = std::make_shared<Tokenizer::Impl>();
  impl->source = file;
  impl->fingerprint = fnv1a64(text);

  LF_CHECK(root.contains("model") && root.at("model").is_object(), ConfigError,
           "{} has no \"model\" object; is it a Hugging Face tokenizer.json?", file.string());
  const json& model = root.at("model");
  std::string type = model.value("type", "");
  if (type.empty() && model.contains("merges")) type = "BPE";
  LF_CHECK(type == "BPE", ConfigError,
           "{}: unsupported tokenizer model type '{}'; lf-train supports 'BPE' (byte-level "
           "like Qwen2/Llama-3/GPT-2, or SentencePiece-style with byte_fallback like "
           "Llama-2/Mistral). Use a model whose tokenizer.json has \"type\": \"BPE\"",
           file.string(), type.empty() ? "(missing)" : type);

  Vocab vocab;
  vocab.reserve(model.at("vocab").size());
  for (auto it = model.at("vocab").begin(); it != model.at("vocab").end(); ++it)
    vocab.emplace(it.key(), it.value().get<int32_t>());
  std::vector<std::pair<std::string, std::string>> merges;
  const json& jm = model.value("merges", json::array());
  merges.reserve(jm.size());
  for (const json& m : jm) {
    if (m.is_array()) {
      merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
    } else {
      const std::string s = m.get<std::string>();
      size_t sp = s.find(' ');
      LF_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, ConfigError,
               "{}: merge '{}' is not two tokens separated by one space", file.string(), s);
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  }

  PreTokenizerInfo info;
  impl->pre_tokenizer = make_pre_tokenizer(root.value("pre_tokenizer", json()), info);
  impl->normalizer = make_normalizer(root.value("normalizer", json()));

  BpeOptions opts;
  opts.byte_level = info.byte_level;
  auto str_or_empty = [&](const char* key) {
    const json& v = model.value(key, json());
    return v.is_string() ? v.get<std::string>() : std::string();
  };
  opts.byte_fallback = model.value("byte_fallback", false);
  opts.fuse_unk = model.value("fuse_unk", false);
  opts.ignore_merges = model.value("ignore_merges", false);
  if (model.value("unk_token", json()).is_string()) opts.unk_token = model.at("unk_token").get<std::string>();
  opts.continuing_subword_prefix = str_or_empty("continuing_subword_prefix");
  opts.end_of_word_suffix = str_or_empty("end_of_word_suffix");
  LF_CHECK(model.value("dropout", json()).is_null() || model.at("dropout").get<double>() == 0.0,
           ConfigError, "{}: BPE dropout is set; training data must tokenize deterministically",
           file.string());
  impl->model = std::make_unique<BpeModel>(std::move(vocab), merges, opts);

  std::vector<AddedToken> added;
  for (const json& t : root.value("added_tokens", json::array())) {
    AddedToken a;
    a.id = t.at("id").get<int32_t>();
    a.content = t.at("content").get<std::string>();
    a.single_word = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", false);
    a.special = t.value("special", false);
    added.push_back(std::move(a));
  }
  impl->added = AddedVocab(std::move(added));
  parse_post_processor(root.value("post_processor", json()), root, *impl, file);
  impl->decoder = make_decoder(root.value("decoder", json()));
  finish_ids(*impl);
  return impl;
}

std::shared_ptr<Tokenizer::Impl> load_gpt2_files(const std::filesystem::path& dir) {
  const auto enc_file = dir / "encoder.json", bpe_file = dir / "vocab.bpe";
  const std::string enc_text = read_file(enc_file);
  const std::string bpe_text = read_file(bpe_file);
  json enc = parse_json(enc_text, enc_file);
  auto impl = std::make_shared<Tokenizer::Impl>();
  impl->source = dir;
  impl->fingerprint = fnv1a64(bpe_text, fnv1a64(enc_text));
  Vocab vocab;
  for (auto it = enc.begin(); it != enc.end(); ++it) vocab.emplace(it.key(), it.value().get<int32_t>());
  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream lines(bpe_text);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.starts_with("#version") || line.empty()) continue;
    size_t sp = line.find(' ');
    LF_CHECK(sp != std::string::npos, ConfigError, "{}:{}: expected 'a b', got '{}'",
             bpe_file.string(), line_no, line);
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  BpeOptions opts;
  opts.byte_level = true;
  std::vector<AddedToken> added;
  if (auto it = vocab.find("<|endoftext|>"); it != vocab.end())
    added.push_back(AddedToken{it->second, "<|endoftext|>", false, false, false, false, true});
  impl->model = std::make_unique<BpeModel>(std::move(vocab), merges, opts);
  impl->pre_tokenizer = make_gpt2_pre_tokenizer();
  impl->decoder = make_byte_level_decoder();
  impl->added = AddedVocab(std::move(added));
  finish_ids(*impl);
  impl->bos_id = impl->eos_id = impl->model->vocab().count("<|endoftext|>")
                                    ? std::optional<int32_t>(impl->model->vocab().at("<|endoftext|>"))
                                    : std::nullopt;
  return impl;
}

void load_tokenizer_config(const std::filesystem::path& file, Tokenizer::Impl& impl) {
  const std::string text = read_file(file);
  json cfg = parse_json(text, file);
  impl.fingerprint = fnv1a64(text, impl.fingerprint);
  auto resolve = [&](const char* key) -> std::optional<int32_t> {
    if (!cfg.contains(key)) return std::nullopt;
    auto content = token_content(cfg.at(key));
    if (!content) return std::nullopt;
    auto id = impl.token_to_id(*content);
    LF_CHECK(id.has_value(), ConfigError, "{}: {} '{}' is not a token of the vocabulary",
             file.string(), key, *content);
    return id;
  };
  impl.bos_id = resolve("bos_token");
  impl.eos_id = resolve("eos_token");
  impl.pad_id = resolve("pad_token");
  impl.add_bos_token = cfg.value("add_bos_token", false);
  if (cfg.contains("tokenizer_class") && cfg.at("tokenizer_class").is_string())
    impl.tokenizer_class = cfg.at("tokenizer_class").get<std::string>();
  impl.has_chat_template = cfg.contains("chat_template") && !cfg.at("chat_template").is_null();
  if (impl.has_chat_template && cfg.at("chat_template").is_string())
    impl.chat_template = cfg.at("chat_template").get<std::string>();
  if (cfg.contains("legacy") && cfg.at("legacy").is_boolean()) impl.legacy = cfg.at("legacy").get<bool>();
  if (cfg.contains("add_prefix_space") && cfg.at("add_prefix_space").is_boolean())
    impl.add_prefix_space = cfg.at("add_prefix_space").get<bool>();
}

void apply_transformers_flavor(Tokenizer::Impl& impl) {
  const std::string& cls = impl.tokenizer_class;
  if (cls != "LlamaTokenizer" && cls != "LlamaTokenizerFast") return;
  if (impl.model->options().byte_level) return;  // Llama-3 style files keep their pipeline
  // transformers 5 LlamaTokenizer.__init__: normalizer None, Metaspace(split=False)
  // with prepend_scheme "always" (legacy) or "first"; "never" without prefix space.
  std::string scheme = impl.legacy ? "always" : "first";
  if (impl.add_prefix_space.has_value() && !*impl.add_prefix_space) scheme = "never";
  json meta = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme},
               {"split", false}};
  PreTokenizerInfo info;
  impl.normalizer.reset();
  impl.pre_tokenizer = make_pre_tokenizer(meta, info);
}

}  // namespace lf
