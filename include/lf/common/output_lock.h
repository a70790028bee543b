#pragma once
// One job per output_dir: node 0 holds `<output_dir>/.lf-train.lock` for the run's life, a
// small JSON file naming its owner (host, pid, boot id, job, start time) and the wall-clock
// time of its last renewal. It is created with link(2) from a unique file (atomic on NFS as
// on a local disk, where O_EXCL and flock are not to be relied on) and renewed every few
// seconds by a thread of its own (write a new file, rename it over the lock). A second job
// on the folder gets a ConfigError naming the holder (exit 2). A lock left by a job that is
// gone is taken over, with a line saying so: its pid is not running on this host (or the
// host rebooted since), or it was not renewed for LF_OUTPUT_LOCK_STALE_S (another host: its
// clock must agree with ours within seconds, as `lf-train doctor --all-nodes` checks).
// A parent that holds the lock for its children (the --retries supervisor, so the job keeps
// the folder across attempts) passes its nonce in LF_OUTPUT_LOCK_HELD; a child then adopts
// the lock instead of taking it. Threading: the renewal thread is owned; the object itself
// is used from one thread.
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace lf {

struct OutputLockOwner {
  std::string host, boot_id, job, nonce, started;
  int64_t pid = 0;
  double started_unix = 0, renewed_unix = 0;
};

class OutputLock {
 public:
  // Creates `dir` when missing. `job` names the job in the lock (the rdzv id, the config).
  static std::unique_ptr<OutputLock> acquire(const std::filesystem::path& dir, const std::string& job);
  ~OutputLock();  // stops renewing; removes the lock when it is still this process's

  const std::string& nonce() const { return me_.nonce; }
  const std::filesystem::path& path() const { return path_; }
  // The owner as the file says now (tests, the doctor); nullopt-like empty nonce when absent.
  static OutputLockOwner read(const std::filesystem::path& lock_file);
  static constexpr const char* kFileName = ".lf-train.lock";

 private:
  OutputLock(std::filesystem::path path, OutputLockOwner me, bool owned);
  void renew_loop(double every_s);
  void write_renewal();

  std::filesystem::path path_;
  OutputLockOwner me_;
  bool owned_ = true;  // false: adopted from a parent (LF_OUTPUT_LOCK_HELD), which renews and removes it
  bool created_dir_ = false;  // output_dir did not exist before the lock
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread renewer_;
};

}  // namespace lf
