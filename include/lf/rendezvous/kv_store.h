#pragma once
// The job's key-value store: the semantics only (no sockets, no timers), so it
// is unit-tested directly. The server owns one and wires waiter callbacks to
// its connections. Values are bytes; counters are decimal strings, as in
// torch's TCPStore, so `add` and `get` agree. Single-threaded: call from the
// server's io thread only.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace lf::rdzv {

class KvStore {
 public:
  using WaiterId = uint64_t;
  using Ready = std::function<void()>;

  void set(const std::string& key, std::string value);
  std::optional<std::string> get(const std::string& key) const;
  // Adds delta to the counter at key (absent = 0) and returns the new value.
  // Throws ConfigError when the existing value is not an integer.
  int64_t add(const std::string& key, int64_t delta);
  // torch's compareSet: sets desired when the current value equals expected
  // (an absent key equals ""), and returns the value the key holds afterwards
  // (for an absent key and non-empty expected: expected, nothing stored).
  std::string compare_set(const std::string& key, const std::string& expected, std::string desired);
  bool erase(const std::string& key);
  bool has_all(const std::vector<std::string>& keys) const;
  size_t size() const { return data_.size(); }

  // Calls ready() once every key exists: at once (returning 0) if they do now,
  // else later from the mutation that completes the set.
  WaiterId wait(std::vector<std::string> keys, Ready ready);
  // Calls ready() once the counter at key is >= target.
  WaiterId wait_counter(std::string key, int64_t target, Ready ready);
  // Forgets a waiter (its deadline passed, its connection closed). False if it already fired.
  bool cancel(WaiterId id);
  size_t waiter_count() const { return waiters_.size(); }

 private:
  struct Waiter {
    std::vector<std::string> keys;
    std::optional<int64_t> counter_target;  // set: counter waiter on keys[0]
    Ready ready;
  };
  bool satisfied(const Waiter& w) const;
  void notify(const std::string& key);
  std::optional<int64_t> counter(const std::string& key) const;

  std::unordered_map<std::string, std::string> data_;
  std::map<WaiterId, Waiter> waiters_;
  // key -> waiters watching it, so a set() only re-checks the waiters of that key.
  std::unordered_multimap<std::string, WaiterId> watchers_;
  WaiterId next_id_ = 1;
};

}  // namespace lf::rdzv
