#pragma once
// Which checkpoint a retried attempt resumes from. Before the first attempt the retry loop
// remembers the checkpoints output_dir already holds (each by the identity of its
// lf_trainer_state.json: a checkpoint written again is a new file); a later attempt resumes
// from the newest sealed checkpoint that is not one of those, i.e. the newest one this
// loop's attempts wrote. So a stale run's checkpoint-500 left in an output_dir that
// `overwrite_output_dir: true` starts over is never picked up, and every node (same shared
// output_dir, nothing written while no attempt runs) chooses the same one. Torch-free:
// "sealed" is the folder renamed into place with its manifest, every file of the size the
// manifest lists; the trainer verifies checksums when it loads.
#include <filesystem>
#include <map>
#include <string>

namespace lf {

class RetryResume {
 public:
  explicit RetryResume(std::filesystem::path output_dir);

  // The newest sealed checkpoint-N written since construction; empty when none.
  std::filesystem::path newest_written_since() const;
  // Whether output_dir was absent or empty at construction (then every file in it is ours).
  bool started_empty() const { return started_empty_; }

 private:
  std::filesystem::path out_;
  std::map<std::string, std::string> before_;  // checkpoint folder name -> state file identity
  bool started_empty_ = true;
};

// "" when dir is a sealed checkpoint (lf_trainer_state.json, lf_manifest.json, every listed
// file at its listed size); else what is missing or wrong.
std::string sealed_checkpoint_problem(const std::filesystem::path& dir);

}  // namespace lf
