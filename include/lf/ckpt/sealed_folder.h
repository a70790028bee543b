#pragma once
// How a checkpoint folder becomes durable and checkable (DESIGN principle 4), for one writer
// or many (rank_commit.h): each writer makes its files durable and records their sizes and
// XXH64 (make_durable), rank 0 writes lf_manifest.json listing every writer's files (fsynced
// too), and only then is the temporary folder renamed into place and the rename made
// durable. Resume checks the manifest, so a torn, half-written or incomplete checkpoint (a
// rank's file missing) is refused, never loaded.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lf::ckpt {

inline constexpr const char* kManifestFile = "lf_manifest.json";

// One durable file of a checkpoint, as the manifest lists it.
struct FileRecord {
  std::string name;  // relative to the checkpoint folder
  uint64_t bytes = 0;
  std::string xxh64;  // hex
  int64_t rank = 0;   // who wrote it
};

// fsyncs dir/name for each name and returns their records (each rank hashes its own files).
std::vector<FileRecord> make_durable(const std::filesystem::path& dir, const std::vector<std::string>& names,
                                     int64_t rank);

// Writes dir/lf_manifest.json listing `files` and makes it and the folder durable.
void write_manifest(const std::filesystem::path& dir, const std::vector<FileRecord>& files);

// One writer: every regular file in dir durable and listed (make_durable + write_manifest).
void seal_checkpoint_folder(const std::filesystem::path& dir);

// Renames tmp to final_dir (replacing an old final_dir) and makes the rename durable.
void commit_checkpoint_folder(const std::filesystem::path& tmp, const std::filesystem::path& final_dir);

enum class CheckDepth { kSizes, kChecksums };

// What checkpoint_damage says of a folder without a manifest (written before lf-train had them).
inline constexpr const char* kNoManifest = "no manifest";

// "" when dir's files are what its manifest lists (sizes, or sizes and checksums); else what
// is wrong, in words, or kNoManifest.
std::string checkpoint_damage(const std::filesystem::path& dir, CheckDepth depth);

// Removes output_dir's ".checkpoint-N.tmp" folders: saves that never finished (a killed run,
// a full disk). Never valid, and a rerun would otherwise fail writing over them at the same
// step. Returns how many it removed.
int remove_stale_temporaries(const std::filesystem::path& output_dir);

}  // namespace lf::ckpt
