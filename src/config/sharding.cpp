#include "sharding.h"

#include <fmt/format.h>

#include "config_schema.h"
#include "deepspeed_config.h"
#include "fsdp_config.h"
#include "json_input.h"
#include "lf/config/sharding.h"

namespace lf::config {

namespace {

// A stage and offload asked for by one source.
struct Ask {
  std::string label;  // "zero_stage: 2", "deepspeed: ds_z3_config.json", "fsdp: full_shard"
  std::string where;
  int64_t stage = 0;
  std::string offload = "none";
};

void check_agree(const std::optional<Ask>& own_stage, const std::optional<Ask>& own_offload, const Ask& file) {
  LF_CHECK(!own_stage || own_stage->stage == file.stage, ConfigError,
           "{}: `{}` and `{}` ({}: stage {}) ask for different ZeRO stages: keep one (or make them equal)",
           own_stage->where, own_stage->label, file.label, file.where, file.stage);
  LF_CHECK(!own_offload || own_offload->offload == file.offload, ConfigError,
           "{}: `{}` and `{}` ({}: offload {}) disagree: keep one (or make them equal)", own_offload->where,
           own_offload->label, file.label, file.where, file.offload);
}

void check_offload_needs_stage(const ParallelSection& c) {
  const std::string from = c.sharding_source.empty() ? "the default zero_stage: 0" : c.sharding_source;
  LF_CHECK(c.offload == "none" || c.zero_stage >= 2, ConfigError,
           "`offload: {}` needs zero_stage 2 or 3 (the stage comes from {}): ZeRO-Offload moves gradient shards to "
           "the host as backward makes them, and stage {} keeps every gradient on the device",
           c.offload, from, c.zero_stage);
  LF_CHECK(c.offload != "params" || c.zero_stage == 3, ConfigError,
           "`offload: params` needs zero_stage 3 (the stage comes from {}, stage {}): parameters are sharded, and so "
           "offloadable, only at stage 3; use `offload: optimizer` below it",
           from, c.zero_stage);
}

}  // namespace

void resolve_sharding(const Reader& r, const std::string& config_dir, LoadedConfig& out) {
  ParallelSection& c = out.plan.parallel;
  std::optional<Ask> own_stage, own_offload;
  if (r.has("zero_stage")) {
    r.read("zero_stage", c.zero_stage, "an integer");
    LF_CHECK(c.zero_stage >= 0 && c.zero_stage <= 3, ConfigError,
             "{}: `zero_stage: {}` is not supported; lf-train supports 0 (data parallel), 1, 2 and 3", r.where("zero_stage"),
             c.zero_stage);
    own_stage = Ask{"zero_stage: " + r.text("zero_stage"), r.where("zero_stage"), c.zero_stage, "none"};
  }
  if (r.has("offload")) {
    r.read("offload", c.offload, "a string");
    check_choice(r, "offload", c.offload, {"none", "optimizer", "params"}, "params offloads the optimizer too");
    own_offload = Ask{"offload: " + c.offload, r.where("offload"), 0, c.offload};
  }
  const bool own_ratio = r.has("offload_ratio");
  if (own_ratio) {
    r.read("offload_ratio", c.offload_ratio, "a number");
    LF_CHECK(c.offload_ratio > 0 && c.offload_ratio <= 1, ConfigError,
             "{}: `offload_ratio: {}`: expected the share of the trainable parameters offloaded, in (0, 1] (1: all)",
             r.where("offload_ratio"), r.text("offload_ratio"));
  }

  auto ds = read_deepspeed(r, out.plan, config_dir, out.warnings);
  auto fsdp = read_fsdp(r, config_dir, out.warnings, out.notes);
  LF_CHECK(!(ds && fsdp), ConfigError,
           "{}: `deepspeed` and {}: `fsdp` both ask for sharding: keep one (HF's Trainer refuses the pair too)",
           r.where("deepspeed"), r.where("fsdp"));

  if (ds) {
    check_agree(own_stage, own_offload, {ds->label, r.where("deepspeed"), ds->stage, ds->offload});
    c.zero_stage = ds->stage;
    c.offload = ds->offload;
    c.sharding_source = ds->label;
    c.overlap_comm = ds->overlap_comm;
    c.reduce_bucket_mb = ds->reduce_bucket_mb;
    c.allgather_bucket_mb = ds->allgather_bucket_mb;
    c.prefetch_bucket_mb = ds->prefetch_bucket_mb;
    if (ds->pin_memory) c.pin_memory = *ds->pin_memory;
    if (ds->offload_ratio) {
      LF_CHECK(!own_ratio || c.offload_ratio == *ds->offload_ratio, ConfigError,
               "{}: `offload_ratio: {}` and `{}` ({}: offload_optimizer.ratio {}) disagree: keep one (or make them equal)",
               r.where("offload_ratio"), c.offload_ratio, ds->label, r.where("deepspeed"), *ds->offload_ratio);
      c.offload_ratio = *ds->offload_ratio;
    }
    c.train_batch_size = ds->train_batch_size;
    out.canonical += "deepspeed (content)=" + json_text(ds->content) + "\n";
  } else if (fsdp) {
    check_agree(own_stage, own_offload, {fsdp->label, r.where("fsdp"), fsdp->stage, fsdp->offload});
    c.zero_stage = fsdp->stage;
    c.offload = fsdp->offload;
    c.sharding_source = fsdp->label;
    if (!fsdp->config.is_null()) out.canonical += "fsdp_config (content)=" + json_text(fsdp->config) + "\n";
  } else if (own_stage) {
    c.sharding_source = own_stage->label;
  }
  check_offload_needs_stage(c);
  LF_CHECK(c.offload_ratio == 1 || c.offload != "none", ConfigError,
           "`offload_ratio: {}` offloads nothing without an offload: add `offload: optimizer` (or params), or drop "
           "the ratio",
           c.offload_ratio);
}

void check_world_size(const JobPlan& plan, int64_t world_size) {
  const ParallelSection& c = plan.parallel;
  const ScheduleSection& s = plan.schedule;
  if (!c.train_batch_size) return;
  const int64_t expected = global_batch(s, world_size);
  LF_CHECK(*c.train_batch_size == expected, ConfigError,
           "`{}` asks for train_batch_size {}, but per_device_train_batch_size {} x gradient_accumulation_steps {} x "
           "world size {} = {}: set train_batch_size to \"auto\" (HF fills it), or run on {} ranks",
           c.sharding_source, *c.train_batch_size, s.per_device_train_batch_size, s.gradient_accumulation_steps,
           world_size, expected, *c.train_batch_size / global_batch(s, 1));
}

}  // namespace lf::config
