#pragma once
// The final outputs of a run belong to that run. They are written into a staging folder
// inside output_dir, then moved into place as a set; weight files already in output_dir that
// the set does not hold (a previous run's adapter beside a full model, a full model's
// weights beside an adapter, an old sharded index beside a single file) are removed with a
// line naming them, since transformers, peft and vLLM would load them with the new ones.
// They are only there when overwrite_output_dir lets a run write into a used folder;
// otherwise the launcher refuses them before training (stale_weight_files). Torch-free.
#include <filesystem>
#include <string>
#include <vector>

namespace lf {

enum class OutputKind { kAdapter, kFullModel };

// Whether `name` is a file HF / PEFT loaders read as weights or as the adapter that goes on them.
bool is_weight_file(const std::string& name);

// The weight files of the other kind in `out` (adapter files for a full model, model weights
// for an adapter), sorted; none when `out` does not exist.
std::vector<std::string> stale_weight_files(const std::filesystem::path& out, OutputKind kind);

// Moves every file of `staged` into `out` (over files of the same name), removes the weight
// files of `out` the set does not hold (logging them), then `staged` itself. Returns the
// removed names.
std::vector<std::string> place_output_set(const std::filesystem::path& staged, const std::filesystem::path& out);

// Whether `out` holds nothing but lf-train's own lock (output_lock.h).
bool output_dir_is_empty(const std::filesystem::path& out);

// The folder the final outputs are staged in, inside output_dir (one filesystem: the moves
// are renames).
std::filesystem::path output_staging_dir(const std::filesystem::path& out);

}  // namespace lf
