#include "lf/data/sft_dataset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <nlohmann/json.hpp>
#include <numeric>

#include "converter.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/common/log.h"
#include "lf/data/chat_template.h"
#include "lf/data/dataset_info.h"
#include "lf/data/pairwise.h"
#include "lf/data/pretrain.h"
#include "numpy_random.h"
#include "parallel.h"
#include "parquet_reader.h"
#include "record_reader.h"
#include "tokenize_progress.h"

namespace lf {
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kCacheFormat = 2;  // 2: packed rows record their sequences (positions) without neat_packing too

std::string template_of(const DataArgs& args) {
  return args.template_name.empty() ? "empty" : args.template_name;
}

// An exclusive flock on dir/.lock, polled until `timeout_s`.
class CacheLock {
 public:
  CacheLock(const fs::path& dir, double timeout_s) {
    fs::create_directories(dir);
    const fs::path file = dir / ".lock";
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    LF_CHECK(fd_ >= 0, ConfigError, "cannot create {}: {}", file.string(), std::strerror(errno));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    bool logged = false;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (!logged) {
        spdlog::info("waiting for another process tokenizing into {}", dir.string());
        logged = true;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::close(fd_);
        LF_THROW(TimeoutError,
                 "waited {:.0f} s for the lock on {} held by another process tokenizing the "
                 "dataset; if none is running, delete the lock file",
                 timeout_s, file.string());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  ~CacheLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

// One dataset entry: every file (a folder's shards are one dataset, as in HF
// datasets), then num_samples (numpy's global RNG, as LLaMA-Factory samples),
// then max_samples, then conversion on all cores (only the kept records).
std::vector<Example> read_dataset(const DatasetAttr& attr, const DataArgs& args, NumpyLegacyRandom& rng) {
  struct Ref {
    size_t file;
    size_t index;
  };
  const std::vector<fs::path> files = list_data_files(attr.path);
  std::vector<DataFile> texts(files.size());
  std::vector<std::vector<nlohmann::json>> rows(files.size());
  std::vector<Ref> refs;
  for (size_t f = 0; f < files.size(); ++f) {
    size_t count;
    if (files[f].extension() == ".parquet") {
      rows[f] = read_parquet_records(files[f]);
      count = rows[f].size();
    } else {
      texts[f] = read_data_file(files[f]);
      count = texts[f].records.size();
    }
    for (size_t i = 0; i < count; ++i) refs.push_back({f, i});
  }
  // Said here, by name: later it would read "val_size leaves no training examples out of 0".
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.string());
  LF_CHECK(!refs.empty(), ConfigError,
           "dataset '{}' is empty: {} hold{} no records (expected JSON lines, a JSON array of records, or Parquet "
           "rows)",
           attr.name, fmt::join(names, ", "), files.size() == 1 ? "s" : "");
  std::vector<size_t> order;
  if (attr.num_samples) {
    order = rng.sample(refs.size(), static_cast<size_t>(std::max<int64_t>(*attr.num_samples, 0)));
  } else {
    order.resize(refs.size());
    std::iota(order.begin(), order.end(), 0);
  }
  if (args.max_samples && order.size() > static_cast<size_t>(*args.max_samples))
    order.resize(static_cast<size_t>(*args.max_samples));
  std::vector<Example> out(order.size());
  parallel_for(order.size(), args.preprocessing_num_workers, [&](size_t k) {
    const Ref& ref = refs[order[k]];
    if (!rows[ref.file].empty()) {
      convert_record(rows[ref.file][ref.index], attr,
                     fmt::format("{}:row {}", files[ref.file].string(), ref.index + 1), out[k]);
      return;
    }
    const DataFile& df = texts[ref.file];
    const RecordSpan& span = df.records[ref.index];
    const std::string origin = fmt::format("{}:{}", files[ref.file].string(), span.line);
    nlohmann::json rec;
    try {
      rec = nlohmann::json::parse(std::string_view(df.text).substr(span.begin, span.end - span.begin));
    } catch (const nlohmann::json::parse_error& e) {
      LF_THROW(ConfigError, "{}: malformed JSON record: {}", origin, e.what());
    }
    convert_record(rec, attr, origin, out[k]);
  });
  return out;
}

// LLaMA-Factory's "The dataset is not applicable in the current training stage", said with the reason.
void check_dataset_for_stage(const DatasetAttr& attr, const std::string& stage) {
  if (pairwise_stage(stage)) {
    LF_CHECK(attr.ranking, ConfigError,
             "stage {} trains on pairs of responses, and dataset '{}' is not a ranking dataset; give it \"ranking\": "
             "true and \"columns\": {{\"chosen\": ..., \"rejected\": ...}} in dataset_info.json (as dpo_en_demo), or "
             "use stage sft for it",
             stage, attr.name);
    return;
  }
  LF_CHECK(!attr.ranking, ConfigError,
           "dataset '{}' is a ranking (preference) dataset; stage {} needs {} (stages dpo and rm train on ranking "
           "datasets)",
           attr.name, stage, feedback_stage(stage) ? "examples tagged by a kto_tag column" : "a supervised (or plain text) one");
  if (feedback_stage(stage))
    LF_CHECK(!attr.kto_tag.empty(), ConfigError,
             "stage kto needs each example tagged desirable or not, and dataset '{}' maps no 'kto_tag' column; add "
             "\"columns\": {{..., \"kto_tag\": \"label\"}} to its entry in dataset_info.json (as kto_en_demo), the "
             "column holding true or false",
             attr.name);
  else
    LF_CHECK(attr.kto_tag.empty(), ConfigError,
             "dataset '{}' maps a kto_tag column (KTO feedback data); stage {} cannot train on it: use stage kto",
             attr.name, stage);
}

}  // namespace

Tokenizer load_tokenizer_for(const DataArgs& args) {
  LF_CHECK(!args.model_name_or_path.empty(), ConfigError,
           "model_name_or_path is not set; it must name a local folder with tokenizer.json");
  return Tokenizer::load(args.resolve(args.model_name_or_path), TokenizerFlavor::kTransformers);
}

std::vector<Example> load_examples(const DataArgs& args, const std::vector<std::string>& names,
                                   NumpyLegacyRandom* global_rng) {
  NumpyLegacyRandom local_rng(static_cast<uint32_t>(args.seed));
  NumpyLegacyRandom& rng = global_rng != nullptr ? *global_rng : local_rng;
  LF_CHECK(!names.empty(), ConfigError, "no dataset given; set `dataset:` to names from {}",
           (args.resolve(args.dataset_dir) / "dataset_info.json").string());
  std::vector<std::vector<Example>> parts;
  for (const DatasetAttr& attr : load_dataset_list(names, args.resolve(args.dataset_dir))) {
    check_dataset_for_stage(attr, args.stage);
    parts.push_back(read_dataset(attr, args, rng));
  }
  if (parts.size() == 1) return std::move(parts[0]);
  std::vector<Example> all;
  std::vector<size_t> lengths;
  for (auto& part : parts) {
    lengths.push_back(part.size());
    all.insert(all.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  if (args.mix_strategy == "concat") return all;
  // merge_dataset -> datasets.interleave_datasets(probabilities, seed, stopping_strategy).
  LF_CHECK(args.interleave_probs.empty() || args.interleave_probs.size() == parts.size(), ConfigError,
           "interleave_probs has {} entries for {} datasets", args.interleave_probs.size(), parts.size());
  const auto indices =
      interleave_indices(lengths, args.interleave_probs, args.seed, args.mix_strategy == "interleave_over");
  std::vector<Example> mixed;
  mixed.reserve(indices.size());
  for (size_t i : indices) mixed.push_back(all[i]);  // oversampling repeats examples
  return mixed;
}

uint64_t sft_cache_key(const DataArgs& args, const Tokenizer& tokenizer) {
  uint64_t h = fnv1a64(fmt::format(
      "v{}|tok:{:x}|tpl:{}|think:{}{}|tools:{}|sys:{}|cut:{}|top:{}|mh:{}|pack:{}/{}{}|max:{}|val:{}|seed:{}|mix:{}:{}",
      kCacheFormat,
      tokenizer.fingerprint(), template_of(args), args.enable_thinking, args.preserve_thinking,
      args.tool_format.value_or(""),
      args.default_system.value_or("\x01"),
      args.cutoff_len, args.train_on_prompt, args.mask_history, args.packing, args.preprocessing_batch_size,
      args.neat_packing ? "/neat" : "", args.max_samples.value_or(-1), args.val_size, args.seed, args.mix_strategy,
      fmt::join(args.interleave_probs, ",")));
  if (args.stage != "sft") h = fnv1a64("|stage:" + args.stage, h);  // sft's keys stay those of older caches
  for (const auto* names : {&args.dataset, &args.eval_dataset}) {
    h = fnv1a64("|set", h);
    for (const DatasetAttr& attr : load_dataset_list(*names, args.resolve(args.dataset_dir))) {
      h = fnv1a64(attr.name, h);
      h = hash_data_files(attr.path, h);
    }
  }
  return h;
}

std::vector<EncodedExample> encode_examples(const std::vector<Example>& examples,
                                            const ChatTemplate& tmpl, const DataArgs& args) {
  if (args.stage == "pt") return encode_pretrain(examples, tmpl, args);  // plain text (pretrain.h)
  SupervisedOptions opts{args.cutoff_len, args.train_on_prompt, args.mask_history};
  std::vector<EncodedExample> encoded(examples.size());
  std::vector<uint8_t> valid(examples.size(), 0);
  {
    // preprocessing_num_workers' observable: the threads this step actually ran on.
    spdlog::info("tokenizing {} examples on {} tokenizer threads", examples.size(),
                 parallel_threads(examples.size(), args.preprocessing_num_workers, 64));
    TokenizeProgress progress(examples.size(), "tokenizing");
    parallel_for(examples.size(), args.preprocessing_num_workers, [&](size_t i) {
      valid[i] = encode_supervised(examples[i], tmpl, opts, encoded[i]) ? 1 : 0;
      progress.tick();
    }, 64);
  }
  std::vector<EncodedExample> out;
  if (!args.packing) {
    out.reserve(examples.size());
    for (size_t i = 0; i < encoded.size(); ++i)
      if (valid[i]) out.push_back(std::move(encoded[i]));
    return out;
  }
  // LLaMA-Factory maps in batches of preprocessing_batch_size and packs within
  // each, so pack boundaries follow it (with its default single process).
  const size_t batch_size = static_cast<size_t>(args.preprocessing_batch_size);
  for (size_t b = 0; b < encoded.size(); b += batch_size) {
    std::vector<EncodedExample> batch;
    for (size_t i = b; i < std::min(encoded.size(), b + batch_size); ++i)
      if (valid[i]) batch.push_back(std::move(encoded[i]));
    auto packs = pack_examples(std::move(batch), args.cutoff_len, tmpl.pad_id());
    out.insert(out.end(), std::make_move_iterator(packs.begin()), std::make_move_iterator(packs.end()));
  }
  return out;
}

TokenizedDataset encode_dataset(const std::vector<Example>& examples, const ChatTemplate& tmpl, const DataArgs& args) {
  if (pairwise_stage(args.stage) || feedback_stage(args.stage)) return encode_preference_examples(examples, tmpl, args);
  return TokenizedDataset::from_examples(encode_examples(examples, tmpl, args), args.neat_packing);
}

TemplateOptions template_options(const DataArgs& args) {
  TemplateOptions o;
  o.default_system = args.default_system;
  o.tool_format = args.tool_format;
  o.enable_thinking = args.enable_thinking;
  o.preserve_thinking = args.preserve_thinking;
  return o;
}

ChatTemplate resolve_template(const DataArgs& args, const Tokenizer& tokenizer) {
  LF_CHECK(!args.template_name.empty() || !tokenizer.has_chat_template(), ConfigError,
           "`template:` is not set and the tokenizer at {} has a chat_template; LLaMA-Factory "
           "would parse that Jinja template, lf-train needs the name: set template: to one of {}",
           tokenizer.source().string(), fmt::join(ChatTemplate::names(), ", "));
  ChatTemplate tmpl(template_of(args), tokenizer, template_options(args));
  LF_CHECK(!(args.train_on_prompt && tmpl.spec().efficient_eos), ConfigError,
           "template '{}' does not support train_on_prompt (as in LLaMA-Factory)", tmpl.spec().name);
  return tmpl;
}

SftData load_sft_data(const DataArgs& args, const Tokenizer& tokenizer, double lock_timeout_s) {
  SftData data;
  const fs::path cache_dir = args.tokenized_path.empty() ? fs::path() : args.resolve(args.tokenized_path);
  data.cache_key = sft_cache_key(args, tokenizer);
  ChatTemplate tmpl = resolve_template(args, tokenizer);
  data.pad_id = tmpl.pad_id();
  data.eos_id = tmpl.eos_id();
  const bool want_eval = args.val_size > 1e-6 || !args.eval_dataset.empty();
  std::unique_ptr<CacheLock> lock;
  if (!cache_dir.empty()) {
    lock = std::make_unique<CacheLock>(cache_dir, lock_timeout_s);
    auto train = TokenizedDataset::load(cache_dir / "train.lftok", data.cache_key);
    auto eval = want_eval ? TokenizedDataset::load(cache_dir / "eval.lftok", data.cache_key)
                          : std::optional<TokenizedDataset>(TokenizedDataset());
    if (train && eval) {
      spdlog::info("loaded tokenized dataset from {} ({} train examples, {} tokens)",
                   cache_dir.string(), train->size(), train->num_tokens());
      data.train = std::move(*train);
      data.eval = std::move(*eval);
      data.from_cache = true;
      return data;
    }
    if (fs::exists(cache_dir / "train.lftok"))
      spdlog::warn("tokenized cache {} was made with other data, tokenizer or arguments; "
                   "re-tokenizing", cache_dir.string());
  }

  // LLaMA-Factory draws num_samples from numpy's global RNG, seeded once by
  // transformers.set_seed(seed): train datasets first, then eval ones.
  NumpyLegacyRandom global_rng(static_cast<uint32_t>(args.seed));
  std::vector<Example> train = load_examples(args, args.dataset, &global_rng);
  const size_t read = train.size();
  data.dropped = find_dropped(train, args.stage);
  std::vector<Example> eval;
  if (!args.eval_dataset.empty()) {
    eval = load_examples(args, args.eval_dataset, &global_rng);
    data.dropped.merge(find_dropped(eval, args.stage));
  } else if (args.val_size > 1e-6) {
    // LLaMA-Factory: train_test_split(test_size=int(val_size) if val_size > 1 else
    // val_size, seed=seed); n_test = ceil(fraction * n); numpy's permutation
    // picks the members (and the order of both parts).
    const size_t n = train.size();
    const size_t n_test = args.val_size > 1 ? static_cast<size_t>(args.val_size)
                                            : static_cast<size_t>(std::ceil(args.val_size * n));
    LF_CHECK(n_test < n, ConfigError, "val_size {} leaves no training examples out of {}",
             args.val_size, n);
    const std::vector<size_t> perm = numpy_permutation(args.seed, n);
    std::vector<Example> tr;
    tr.reserve(n - n_test);
    for (size_t k = 0; k < n; ++k) (k < n_test ? eval : tr).push_back(std::move(train[perm[k]]));
    train = std::move(tr);
  }
  report_dropped(data.dropped, args);  // once, with the counts (or an error under invalid_records: error)
  data.train = encode_dataset(train, tmpl, args);
  LF_CHECK(data.train.size() > 0, ConfigError,
           "dataset {} has no usable training example after filtering ({} records read); {}",
           fmt::join(args.dataset, ","), read,
           args.stage == "pt" ? fmt::format("stage pt packs the texts into blocks of cutoff_len {} tokens: there are "
                                            "fewer tokens than one block (lower cutoff_len, or `packing: false`)",
                                            args.cutoff_len)
                              : "alpaca records need a string output, sharegpt ones must end with an assistant turn");
  if (want_eval) data.eval = encode_dataset(eval, tmpl, args);
  if (!cache_dir.empty()) {
    if (want_eval) data.eval.save(cache_dir / "eval.lftok", data.cache_key);
    data.train.save(cache_dir / "train.lftok", data.cache_key);
    spdlog::info("tokenized dataset saved to {}", cache_dir.string());
  }
  return data;
}

}  // namespace lf
