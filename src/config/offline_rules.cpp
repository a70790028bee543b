// What lf-train cannot do offline, said as that (issue 34): LLaMA-Factory's examples that need the Hub
// (`dataset_dir: ONLINE`, `dataset_dir: REMOTE:org/repo`) or a Ray cluster (USE_RAY=1) stop here, before
// anything looks for a file, instead of failing later on a missing path named `REMOTE:...`.
// (A model id in model_name_or_path is said by the model loader: src/model/loader.cpp.)
#include <cstdlib>
#include <string>

#include "config_rules.h"

namespace lf::config {

void check_offline(const Reader& r, const JobPlan& c) {
  const std::string& dir = c.data.dataset_dir;
  LF_CHECK(dir != "ONLINE", ConfigError,
           "{}: `dataset_dir: ONLINE` loads every dataset by name from the Hugging Face Hub; lf-train runs offline "
           "and reads local files only: download the datasets, describe them in a dataset_info.json and set "
           "`dataset_dir:` to its folder",
           r.where("dataset_dir"));
  LF_CHECK(dir.rfind("REMOTE:", 0) != 0, ConfigError,
           "{}: `dataset_dir: {}` downloads dataset_info.json (and the datasets) from the Hub repository '{}'; lf-train "
           "runs offline and reads local files only: download that repository (e.g. `huggingface-cli download {} "
           "--repo-type dataset --local-dir DIR`) and set `dataset_dir: DIR`",
           r.where("dataset_dir"), dir, dir.substr(7), dir.substr(7));
  // LLaMA-Factory's use_ray(): the environment decides, its YAML keys (ray_num_workers, ...) only size it.
  const char* ray = std::getenv("USE_RAY");
  const std::string v = ray ? ray : "";
  LF_CHECK(!(v == "1" || v == "true" || v == "True" || v == "TRUE" || v == "y" || v == "Y"), ConfigError,
           "USE_RAY={} asks LLaMA-Factory to train on a Ray cluster (ray_num_workers workers); lf-train launches its "
           "own workers and needs no Ray: unset USE_RAY and run `lf-train CONFIG` on each node (NPROC_PER_NODE, "
           "NNODES, MASTER_ADDR; docs/multi-node.md)",
           v);
}

}  // namespace lf::config
