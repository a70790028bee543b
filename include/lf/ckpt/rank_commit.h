#pragma once
// The per-rank commit of a checkpoint (DESIGN principle 4 with several writers): every rank
// writes its own files into the same temporary folder, makes them durable and reports them
// (names, sizes, checksums: each rank hashes its own) through a CommitChannel; rank 0 waits
// for every rank's report, writes the manifest listing all of them and renames the folder.
// A rank that dies or hangs before reporting leaves no checkpoint: rank 0 never renames (the
// job is stopped, or its wait times out), and the temporary folder is removed at the next
// start (sealed_folder.h). Resume checks every file the manifest lists, so a checkpoint
// missing one rank's file is refused.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "lf/ckpt/sealed_folder.h"

namespace lf::rdzv {
class StoreClient;
}

namespace lf::ckpt {

class CommitChannel {
 public:
  virtual ~CommitChannel() = default;
  // Rank `rank`'s files of checkpoint `tag` are durable.
  virtual void report(const std::string& tag, int64_t rank, const std::vector<FileRecord>& files) = 0;
  // Rank 0: the files of `tag` of ranks 1..world-1, waiting up to `timeout` (TimeoutError
  // naming the ranks that did not report).
  virtual std::vector<FileRecord> collect(const std::string& tag, int64_t world, std::chrono::milliseconds timeout) = 0;
};

// Reports through the job's key-value store (borrowed; used from the training thread only),
// under `prefix` (include the generation: a restarted job must not read an old report).
std::unique_ptr<CommitChannel> make_store_commit_channel(rdzv::StoreClient& store, std::string prefix);

struct RankCommit {
  std::filesystem::path tmp;        // the temporary folder every rank wrote into
  std::filesystem::path final_dir;  // output_dir/checkpoint-N
  std::string tag;                  // unique per checkpoint of the job ("checkpoint-40")
  int64_t rank = 0, world = 1;
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
};

// This rank's part. Ranks > 0: `mine` (file names in tmp) made durable and reported. Rank 0:
// waits for the other ranks' reports, then claims every other file in tmp as its own (made
// durable), writes the manifest listing all of them and renames tmp to final_dir. channel may
// be null when world == 1.
void commit_rank_files(const RankCommit& commit, const std::vector<std::string>& mine, CommitChannel* channel);

}  // namespace lf::ckpt
