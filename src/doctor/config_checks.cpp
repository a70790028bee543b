// With CONFIG: what the job reads and writes, checked as the job would use it: the config
// itself, the model folder (config.json, weights readable), the tokenizer (loaded), the
// datasets (dataset_info.json entries and their files), output_dir (a file written, synced
// and removed), free space for a checkpoint, and the predicted GPU memory per rank.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <optional>

#include "lf/common/error.h"
#include "lf/common/disk_space.h"
#include "lf/data/dataset_info.h"
#include "lf/data/drop_report.h"
#include "lf/data/sft_dataset.h"
#include "lf/doctor/doctor.h"
#include "lf/model/config.h"
#include "lf/model/initial_weights.h"
#include "lf/plan/memory_model.h"
#include "lf/plan/model_units.h"
#include "lf/tokenizer/tokenizer.h"

namespace lf::doctor {

namespace fs = std::filesystem;

namespace {


std::string gib(double b) { return size_text(b); }

// What the run needs, from config.json alone (lf/plan: the one memory model).
struct Estimate {
  plan::ParameterCounts counts;
  plan::MemoryPrediction memory;
  // The launcher's and the worker's rule (lf/common/disk_space.h): fp32 weights + moments.
  double checkpoint_bytes() const {
    return static_cast<double>(save_bytes_needed(static_cast<uint64_t>(counts.trainable), true));
  }
};

// Readable: open and read a byte (a permission or a stale NFS handle shows here, not in stat).
bool readable(const fs::path& p, std::string* why) {
  std::ifstream in(p, std::ios::binary);
  char c;
  if (in && (in.read(&c, 1) || in.eof())) return true;
  if (why) *why = std::strerror(errno);
  return false;
}

void check_model(const config::JobPlan& c, Report& report) {
  const fs::path dir(c.model.model_name_or_path);
  if (!fs::is_directory(dir))
    return report.fail("model", fmt::format("model_name_or_path {} is not a folder on this node", dir.string()),
                       "copy or mount the model on every node at the same path (lf-train never downloads: "
                       "`huggingface-cli download <repo> --local-dir <folder>`)");
  std::string why;
  if (!readable(dir / "config.json", &why))
    return report.fail("model", fmt::format("{}/config.json is not readable: {}", dir.string(), why),
                       "a Hugging Face model folder has config.json beside its weights");
  uintmax_t bytes = 0;
  int files = 0;
  std::vector<std::string> unreadable;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".safetensors") continue;
    ++files;
    bytes += fs::file_size(e.path(), ec);
    if (!readable(e.path(), &why)) unreadable.push_back(e.path().filename().string() + ": " + why);
  }
  if (!unreadable.empty())
    return report.fail("model", fmt::format("unreadable weights: {}", fmt::join(unreadable, "; ")),
                       "fix the permissions (the job runs as this user) or re-download the files");
  // Where the run's initial weights come from, as lf-train and lf-worker decide it.
  model::InitialWeights initial;
  try {
    initial = model::choose_initial_weights(dir, c.model.init_weights, c.seed);
  } catch (const std::exception& e) {
    return report.fail("model", e.what(),
                       "download the weights again, or set `init_weights: random` to train from config.json alone");
  }
  report.pass("model", fmt::format("{}: config.json, {} safetensors file(s), {}{}", dir.string(), files,
                                   gib(static_cast<double>(bytes)), initial.note.empty() ? "" : "; " + initial.note));
}

void check_tokenizer(const config::JobPlan& c, Report& report) {
  try {
    const auto t = Tokenizer::load(c.model.model_name_or_path);
    report.pass("tokenizer", fmt::format("loads from {} ({} tokens)", c.model.model_name_or_path, t.vocab_size()));
  } catch (const std::exception& e) {
    report.fail("tokenizer", fmt::format("does not load from {}: {}", c.model.model_name_or_path, e.what()),
                "the model folder needs tokenizer.json (or vocab.json + merges.txt) and tokenizer_config.json");
  }
}

// The records training would drop, counted as training counts them (lf/data/drop_report.h).
void check_records(const config::JobPlan& c, const std::vector<std::string>& names, const char* key, Report& report) {
  const auto dropped = find_dropped(load_examples(c.data, names), c.data.stage);
  const std::string check = std::string(key) + "-records";
  if (dropped.dropped == 0)
    return report.pass(check, fmt::format("{} record(s) of {}, none dropped", dropped.records, fmt::join(names, ",")));
  const std::string text = dropped.text(fmt::format("{}", fmt::join(names, ",")));
  const std::string fix = "fix those records (alpaca: `output` a string; sharegpt: alternating turns ending with the "
                          "assistant's); invalid_records: error stops a job on them";
  if (c.data.invalid_records == "error") report.fail(check, text + " (invalid_records: error)", fix);
  else report.warn(check, text, fix);
}

void check_datasets(const config::JobPlan& c, Report& report) {
  for (const auto* names : {&c.data.dataset, &c.data.eval_dataset}) {
    if (names->empty()) continue;
    const char* key = names == &c.data.dataset ? "dataset" : "eval_dataset";
    try {
      std::vector<std::string> seen, bad;
      for (const auto& a : load_dataset_list(*names, c.data.dataset_dir)) {
        std::string why;
        std::error_code ec;
        if (fs::is_directory(a.path, ec)) seen.push_back(a.name + " (folder " + a.path.string() + ")");
        else if (readable(a.path, &why)) seen.push_back(a.name + " (" + a.path.string() + ")");
        else bad.push_back(a.name + ": " + a.path.string() + ": " + why);
      }
      if (!bad.empty()) {
        report.fail(key, fmt::format("unreadable: {}", fmt::join(bad, "; ")),
                    "put the files where dataset_info.json says, on every node (or on the shared disk)");
        continue;
      }
      report.pass(key, fmt::format("readable: {}", fmt::join(seen, ", ")));
      check_records(c, *names, key, report);
    } catch (const std::exception& e) {
      report.fail(key, e.what(), fmt::format("check {} and {}/dataset_info.json", key, c.data.dataset_dir));
    }
  }
}

void check_output_dir(const config::JobPlan& c, Report& report, const Estimate* est) {
  const fs::path out(c.output.output_dir);
  std::error_code ec;
  // The doctor creates nothing: a missing output_dir is judged by the nearest folder above it
  // that exists (lf-train creates output_dir there); the probe file is removed at once.
  fs::path at = fs::absolute(out, ec);
  while (!at.empty() && !fs::exists(at, ec) && at != at.root_path()) at = at.parent_path();
  const fs::path probe = at / fmt::format(".lf-doctor-write-{}", ::getpid());
  const int fd = ec ? -1 : ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const bool ok = fd >= 0 && ::write(fd, "ok\n", 3) == 3 && ::fsync(fd) == 0;
  const std::string why = ec ? ec.message() : std::strerror(errno);
  if (fd >= 0) ::close(fd);
  fs::remove(probe, ec);
  if (!ok)
    return report.fail("output-dir", fmt::format("output_dir {} is not writable here: {}", out.string(), why),
                       "choose a folder this user can write, on a disk every node sees");
  struct statvfs s {};
  ::statvfs(at.c_str(), &s);
  const double free_bytes = static_cast<double>(s.f_bavail) * s.f_frsize;
  report.pass("output-dir", at == fs::absolute(out, ec)
                                ? fmt::format("{} is writable ({} free)", out.string(), gib(free_bytes))
                                : fmt::format("{} does not exist yet; {} above it is writable ({} free): lf-train "
                                              "creates it", out.string(), at.string(), gib(free_bytes)));
  if (!est) return;
  const int64_t keep = c.output.save_total_limit.value_or(0);
  const std::string need = fmt::format("one checkpoint of this run is ~{} ({} trainable parameters x 12 bytes + 5% + 2 MiB){}",
                                       gib(est->checkpoint_bytes()), est->counts.trainable,
                                       keep > 0 ? fmt::format(", save_total_limit {} keeps {}", keep,
                                                              gib(est->checkpoint_bytes() * static_cast<double>(keep)))
                                                : "");
  if (free_bytes < est->checkpoint_bytes())
    report.fail("disk-space", fmt::format("{} free in {}, but {}", gib(free_bytes), out.string(), need),
                "free space there, or point output_dir at a larger disk; a save that runs out of space fails the job");
  else if (keep > 0 && free_bytes < est->checkpoint_bytes() * static_cast<double>(keep))
    report.warn("disk-space", fmt::format("{} free in {}: {}", gib(free_bytes), out.string(), need),
                "lower save_total_limit or free space before the later saves");
  else
    report.pass("disk-space", fmt::format("{} free; {}", gib(free_bytes), need));
}

// Free memory against the predicted peak plus the caching allocator's reserve (what the driver
// must give), its largest terms named.
void check_gpu_memory(const Estimate& est, const NodeFacts& facts, Report& report) {
  if (facts.free_gpu_memory_bytes <= 0) return;  // CPU run, or no NVML
  const auto& m = est.memory;
  auto terms = m.gpu;
  std::sort(terms.begin(), terms.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  std::vector<std::string> largest;
  for (size_t i = 0; i < std::min<size_t>(3, terms.size()); ++i) largest.push_back(fmt::format("{} {}", terms[i].kind, gib(terms[i].bytes)));
  const double need = m.gpu_peak() + m.allocator_slack;
  const std::string seen = fmt::format(
      "predicted ~{} per rank (peak {} at the {}: {}; + allocator reserve ~{}; `lf-train plan` for every term) vs {} free "
      "on the fullest GPU", gib(need), gib(m.gpu_peak()), m.peak_phase, fmt::join(largest, ", "), gib(m.allocator_slack),
      gib(facts.free_gpu_memory_bytes));
  if (need > facts.free_gpu_memory_bytes)
    report.warn("gpu-memory", seen + ": likely out of memory",
                "lower per_device_train_batch_size or cutoff_len (raise gradient_accumulation_steps to keep the "
                "batch), keep gradient checkpointing on, use LoRA, or shard (deepspeed ZeRO-2/3)");
  else
    report.pass("gpu-memory", seen);
}

}  // namespace

void check_config(const DoctorContext& ctx, Report& report, const NodeFacts& facts) {
  if (ctx.config_path.empty()) return;
  if (!ctx.config) return report.fail("config", ctx.config_error, "fix the config (the message says where)");
  const auto& c = *ctx.config;
  report.pass("config", fmt::format("{} parses: {} {} of {}", ctx.config_path, c.objective.stage, c.adapter.finetuning_type,
                                    c.model.model_name_or_path));
  check_model(c, report);
  check_tokenizer(c, report);
  check_datasets(c, report);
  std::optional<Estimate> est;
  try {
    const auto mc = model::load_model_config(fs::path(c.model.model_name_or_path) / "config.json");
    est = Estimate{plan::parameter_counts(mc, c.adapter), plan::predict_memory(c, mc, {ctx.nnodes, facts.nproc})};
  } catch (const std::exception& e) {
    report.info("estimate", fmt::format("no size estimate: {}", e.what()));
  }
  check_output_dir(c, report, est ? &*est : nullptr);
  if (est) check_gpu_memory(*est, facts, report);
}

}  // namespace lf::doctor
