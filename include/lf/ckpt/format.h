#pragma once
// The version of lf-train's checkpoint layout, stored as "format_version" in a checkpoint's
// lf_trainer_state.json. 1 (no key): before the per-rank commit (one writer, optimizer state
// as whole tensors in optimizer.safetensors); 2: the per-rank commit, the manifest naming
// each file's rank, optimizer state as parameter ranges in per-rank files when sharded
// (optimizer_state.h). Both resume; a newer version is refused: its layout is unknown here.
#include <filesystem>
#include <nlohmann/json.hpp>

namespace lf::ckpt {

inline constexpr int kCheckpointFormat = 2;

// ConfigError when lf_state (a checkpoint's lf_trainer_state.json) has a format_version this
// lf-train does not read.
void check_format_version(const nlohmann::json& lf_state, const std::filesystem::path& dir);

}  // namespace lf::ckpt
