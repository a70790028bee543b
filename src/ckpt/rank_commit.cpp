#include "lf/ckpt/rank_commit.h"

#include <nlohmann/json.hpp>
#include <set>

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/rendezvous/store_client.h"

namespace lf::ckpt {
namespace {

class StoreCommitChannel final : public CommitChannel {
 public:
  StoreCommitChannel(rdzv::StoreClient& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

  void report(const std::string& tag, int64_t rank, const std::vector<FileRecord>& files) override {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& f : files) j.push_back({{"name", f.name}, {"bytes", f.bytes}, {"xxh64", f.xxh64}});
    store_.set(key(tag, rank), j.dump());
  }

  std::vector<FileRecord> collect(const std::string& tag, int64_t world, std::chrono::milliseconds timeout) override {
    std::vector<std::string> keys;
    for (int64_t r = 1; r < world; ++r) keys.push_back(key(tag, r));
    if (keys.empty()) return {};
    store_.wait(keys, timeout);
    std::vector<FileRecord> all;
    for (int64_t r = 1; r < world; ++r) {
      const auto& k = keys[static_cast<size_t>(r - 1)];
      for (const auto& f : nlohmann::json::parse(store_.get(k).value_or("[]")))
        all.push_back({f.at("name"), f.at("bytes"), f.at("xxh64"), r});
      store_.erase(k);  // the store keeps a few keys, not one per save
    }
    return all;
  }

 private:
  std::string key(const std::string& tag, int64_t rank) const { return fmt::format("{}/{}/rank{}", prefix_, tag, rank); }
  rdzv::StoreClient& store_;
  std::string prefix_;
};

// Fault injection for the tests (LF_FAULT_CKPT_EXIT_RANK=R): rank R dies with its files
// written and durable but not yet reported, the moment the protocol exists to cover.
void maybe_die_before_report(int64_t rank) {
  const auto v = knob_int("LF_FAULT_CKPT_EXIT_RANK");
  if (v && *v == rank) {
    spdlog::error("LF_FAULT_CKPT_EXIT_RANK={}: exiting before reporting the checkpoint durable", rank);
    std::_Exit(3);
  }
}

}  // namespace

std::unique_ptr<CommitChannel> make_store_commit_channel(rdzv::StoreClient& store, std::string prefix) {
  return std::make_unique<StoreCommitChannel>(store, std::move(prefix));
}

void commit_rank_files(const RankCommit& c, const std::vector<std::string>& mine, CommitChannel* channel) {
  LF_CHECK(channel != nullptr || c.world == 1, ConfigError, "checkpoint commit over {} ranks needs a channel", c.world);
  if (c.rank != 0) {
    const auto records = make_durable(c.tmp, mine, c.rank);
    maybe_die_before_report(c.rank);
    channel->report(c.tag, c.rank, records);
    return;
  }
  auto records = channel ? channel->collect(c.tag, c.world, c.timeout) : std::vector<FileRecord>{};
  std::set<std::string> theirs, own;
  for (const auto& r : records) theirs.insert(r.name);
  for (const auto& e : std::filesystem::directory_iterator(c.tmp)) {
    const auto name = e.path().filename().string();
    if (e.is_regular_file() && name != kManifestFile && !theirs.count(name)) own.insert(name);
  }
  for (auto& r : make_durable(c.tmp, {own.begin(), own.end()}, 0)) records.push_back(std::move(r));
  write_manifest(c.tmp, records);
  commit_checkpoint_folder(c.tmp, c.final_dir);
}

}  // namespace lf::ckpt
