#include "lf/common/output_lock.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/hostname.h"
#include "lf/common/job_token.h"
#include "lf/common/wall_clock.h"

namespace lf {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string this_boot() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::string utc_text(double t) {
  const std::time_t s = static_cast<std::time_t>(t);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&s));
  return buf;
}

std::string to_text(const OutputLockOwner& o) {
  return json{{"host", o.host}, {"pid", o.pid}, {"boot_id", o.boot_id}, {"job", o.job}, {"nonce", o.nonce},
              {"started", o.started}, {"started_unix", o.started_unix}, {"renewed_unix", o.renewed_unix}}
             .dump() + "\n";
}

// The whole file, flushed to the disk (a renewal must not leave an empty lock after a crash).
bool write_durably(const fs::path& p, const std::string& text) {
  FILE* f = std::fopen(p.c_str(), "w");
  if (!f) return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  return std::fclose(f) == 0 && ok;
}

bool pid_running(int64_t pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::string describe(const OutputLockOwner& o) {
  return fmt::format("host {}, pid {}, job '{}', started {}", o.host, o.pid, o.job, o.started);
}

// Why the lock's owner is gone, or "" while it may live.
std::string gone_because(const OutputLockOwner& o, double mtime, double stale_s) {
  const bool same_host = o.host == this_hostname();
  if (same_host && !o.boot_id.empty() && o.boot_id != this_boot()) return "this host rebooted since it took the lock";
  if (same_host && !pid_running(o.pid)) return fmt::format("pid {} is not running on this host", o.pid);
  const double age = wall_now() - std::max(o.renewed_unix, mtime);
  if (age > stale_s) return fmt::format("not renewed for {:.0f} s (LF_OUTPUT_LOCK_STALE_S {:.0f})", age, stale_s);
  return "";
}

double file_mtime(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
}

double stale_seconds() {
  const double s = knob_number("LF_OUTPUT_LOCK_STALE_S").value_or(60);
  LF_CHECK(s > 0, ConfigError, "LF_OUTPUT_LOCK_STALE_S={} must be > 0 seconds", s);
  return s;
}

// link(2) is atomic on NFS too; a lost reply to a link that happened shows as a link count of 2.
bool link_exclusively(const fs::path& from, const fs::path& to, int* error) {
  if (::link(from.c_str(), to.c_str()) == 0) return true;
  *error = errno;
  struct stat st {};
  return ::stat(from.c_str(), &st) == 0 && st.st_nlink == 2;
}

}  // namespace

OutputLockOwner OutputLock::read(const fs::path& lock_file) {
  OutputLockOwner o;
  std::ifstream in(lock_file);
  if (!in) return o;
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (!j.is_object()) return o;
  o.host = j.value("host", "");
  o.pid = j.value("pid", int64_t{0});
  o.boot_id = j.value("boot_id", "");
  o.job = j.value("job", "");
  o.nonce = j.value("nonce", "");
  o.started = j.value("started", "");
  o.started_unix = j.value("started_unix", 0.0);
  o.renewed_unix = j.value("renewed_unix", 0.0);
  return o;
}

std::unique_ptr<OutputLock> OutputLock::acquire(const fs::path& dir, const std::string& job) {
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  LF_CHECK(!ec, ConfigError, "output_dir {}: cannot create it: {}", dir.string(), ec.message());
  const fs::path path = dir / kFileName;
  if (const auto held = knob_string("LF_OUTPUT_LOCK_HELD")) {
    OutputLockOwner parent = read(path);
    if (!parent.nonce.empty() && parent.nonce == *held)
      return std::unique_ptr<OutputLock>(new OutputLock(path, parent, false));
  }
  OutputLockOwner me;
  me.host = this_hostname();
  me.boot_id = this_boot();
  me.pid = ::getpid();
  me.job = job;
  me.nonce = make_job_token().substr(0, 16);
  me.started_unix = me.renewed_unix = wall_now();
  me.started = utc_text(me.started_unix);
  const double stale_s = stale_seconds();
  for (int attempt = 0; attempt < 4; ++attempt) {
    const fs::path mine = dir / fmt::format("{}.{}.new", kFileName, me.nonce);
    LF_CHECK(write_durably(mine, to_text(me)), ConfigError, "output_dir {}: cannot write {}: {} (a read-only or full "
             "disk?)", dir.string(), mine.string(), std::strerror(errno));
    int error = 0;
    const bool linked = link_exclusively(mine, path, &error);
    ::unlink(mine.c_str());
    if (linked) {
      auto lock = std::unique_ptr<OutputLock>(new OutputLock(path, me, true));
      lock->created_dir_ = created;
      return lock;
    }
    LF_CHECK(error == EEXIST, ConfigError, "output_dir {}: cannot create the job's lock {}: {}", dir.string(),
             path.string(), std::strerror(error));
    const OutputLockOwner holder = read(path);
    const std::string gone = gone_because(holder, file_mtime(path), stale_s);
    LF_CHECK(!gone.empty(), ConfigError,
             "output_dir {} is in use by another lf-train job ({}; renewed {:.0f} s ago; lock file {}): two jobs on one "
             "folder would overwrite each other's checkpoints and outputs. Wait for it to end, or give this job "
             "another output_dir; if that job is really gone, delete the lock file",
             dir.string(), describe(holder), wall_now() - holder.renewed_unix, path.string());
    // Moved aside, then checked: another taker may have replaced the stale lock meanwhile.
    const fs::path aside = dir / fmt::format("{}.{}.stale", kFileName, me.nonce);
    if (::rename(path.c_str(), aside.c_str()) != 0) continue;
    const OutputLockOwner moved = read(aside);
    if (moved.nonce != holder.nonce || moved.renewed_unix != holder.renewed_unix) {
      (void)::link(aside.c_str(), path.c_str());
      ::unlink(aside.c_str());
      continue;
    }
    ::unlink(aside.c_str());
    spdlog::warn("output_dir {}: taking over the lock of a job that is gone ({}; {})", dir.string(),
                 holder.nonce.empty() ? "an unreadable lock file" : describe(holder), gone);
  }
  LF_THROW(ConfigError, "output_dir {}: could not take the job's lock {} (other jobs keep taking it); try again",
           dir.string(), path.string());
}

OutputLock::OutputLock(fs::path path, OutputLockOwner me, bool owned)
    : path_(std::move(path)), me_(std::move(me)), owned_(owned) {
  if (owned_) renewer_ = std::thread([this] { renew_loop(std::max(0.2, stale_seconds() / 6)); });
}

OutputLock::~OutputLock() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (owned_ && read(path_).nonce == me_.nonce) ::unlink(path_.c_str());
  // A folder the lock made and the job never used (it failed before writing) goes too.
  std::error_code ec;
  if (created_dir_ && fs::is_empty(path_.parent_path(), ec)) fs::remove(path_.parent_path(), ec);
}

void OutputLock::renew_loop(double every_s) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::duration<double>(every_s), [this] { return stop_; })) write_renewal();
}

// A new file renamed over the lock: a reader sees the old or the new one, never half of one.
void OutputLock::write_renewal() {
  const OutputLockOwner now = read(path_);
  if (now.nonce != me_.nonce) {
    if (!now.nonce.empty() || !owned_) return;
    spdlog::error("output_dir {}: this job's lock was taken by another job ({}); stop one of them", path_.parent_path().string(),
                  describe(now));
    owned_ = false;
    return;
  }
  me_.renewed_unix = wall_now();
  const fs::path next = path_.parent_path() / fmt::format("{}.{}.renew", kFileName, me_.nonce);
  if (write_durably(next, to_text(me_))) ::rename(next.c_str(), path_.c_str());
  else ::unlink(next.c_str());
}

}  // namespace lf
