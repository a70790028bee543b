#pragma once
// How a checkpoint folder becomes durable and checkable (DESIGN principle 4): its files are
// fsynced, a manifest lists each file's size and XXH64 (lf_manifest.json, fsynced too), and
// only then is the temp folder renamed into place and the rename made durable. Resume
// checks the manifest, so a torn or half-written checkpoint is refused, never loaded.
#include <filesystem>
#include <string>

namespace lf::train {

inline constexpr const char* kManifestFile = "lf_manifest.json";

// Writes dir/lf_manifest.json for every regular file in dir and makes all of them durable.
void seal_checkpoint_folder(const std::filesystem::path& dir);

// Renames tmp to final_dir (replacing an old final_dir) and makes the rename durable.
void commit_checkpoint_folder(const std::filesystem::path& tmp, const std::filesystem::path& final_dir);

enum class CheckDepth { kSizes, kChecksums };

// What checkpoint_damage says of a folder without a manifest (written before lf-train had them).
inline constexpr const char* kNoManifest = "no manifest";

// "" when dir's files are what its manifest lists (sizes, or sizes and checksums); else what
// is wrong, in words, or kNoManifest.
std::string checkpoint_damage(const std::filesystem::path& dir, CheckDepth depth);

}  // namespace lf::train
