#pragma once
// Validation of a read JobPlan, in one place: the required keys, each declared
// key's own rule (config_schema.cpp), then the rules between keys, then the
// values derived from others (lora_alpha). Internal to src/config.
#include "config_reader.h"
#include "lf/config/train_config.h"

namespace lf::config {

// Throws ConfigError naming the key, where it was set and what to do.
void check_config(const Reader& r, JobPlan& c);
// What needs the Hub or a Ray cluster, refused as that (offline_rules.cpp).
void check_offline(const Reader& r, const JobPlan& c);
// The rules that need the parallel section, once it is resolved (sharding.h).
void check_parallel_rules(const JobPlan& c);

}  // namespace lf::config
