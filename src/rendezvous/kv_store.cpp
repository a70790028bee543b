#include "lf/rendezvous/kv_store.h"

#include <charconv>

#include "lf/common/error.h"

namespace lf::rdzv {

void KvStore::set(const std::string& key, std::string value) {
  data_[key] = std::move(value);
  notify(key);
}

std::optional<std::string> KvStore::get(const std::string& key) const {
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> KvStore::counter(const std::string& key) const {
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  int64_t v = 0;
  const std::string& s = it->second;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  LF_CHECK(ec == std::errc() && ptr == s.data() + s.size(), ConfigError,
           "store key '{}' holds '{}', not an integer counter", key, s.substr(0, 64));
  return v;
}

int64_t KvStore::add(const std::string& key, int64_t delta) {
  int64_t v = counter(key).value_or(0) + delta;
  set(key, std::to_string(v));
  return v;
}

std::string KvStore::compare_set(const std::string& key, const std::string& expected, std::string desired) {
  auto it = data_.find(key);
  if (it == data_.end()) {
    if (!expected.empty()) return expected;
    set(key, desired);
    return desired;
  }
  if (it->second != expected) return it->second;
  set(key, desired);
  return desired;
}

bool KvStore::erase(const std::string& key) { return data_.erase(key) > 0; }

bool KvStore::has_all(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

bool KvStore::satisfied(const Waiter& w) const {
  if (w.counter_target) {
    auto v = counter(w.keys[0]);
    return v && *v >= *w.counter_target;
  }
  return has_all(w.keys);
}

KvStore::WaiterId KvStore::wait(std::vector<std::string> keys, Ready ready) {
  Waiter w{std::move(keys), std::nullopt, std::move(ready)};
  if (satisfied(w)) {
    w.ready();
    return 0;
  }
  WaiterId id = next_id_++;
  for (const auto& k : w.keys) watchers_.emplace(k, id);
  waiters_.emplace(id, std::move(w));
  return id;
}

KvStore::WaiterId KvStore::wait_counter(std::string key, int64_t target, Ready ready) {
  Waiter w{{std::move(key)}, target, std::move(ready)};
  if (satisfied(w)) {
    w.ready();
    return 0;
  }
  WaiterId id = next_id_++;
  watchers_.emplace(w.keys[0], id);
  waiters_.emplace(id, std::move(w));
  return id;
}

bool KvStore::cancel(WaiterId id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return false;
  for (const auto& k : it->second.keys) {
    auto [b, e] = watchers_.equal_range(k);
    for (auto w = b; w != e; ++w)
      if (w->second == id) {
        watchers_.erase(w);
        break;
      }
  }
  waiters_.erase(it);
  return true;
}

void KvStore::notify(const std::string& key) {
  std::vector<WaiterId> fired;
  auto [b, e] = watchers_.equal_range(key);
  for (auto it = b; it != e; ++it) {
    auto w = waiters_.find(it->second);
    if (w != waiters_.end() && satisfied(w->second)) fired.push_back(it->second);
  }
  for (WaiterId id : fired) {
    auto w = waiters_.find(id);
    if (w == waiters_.end()) continue;
    Ready ready = std::move(w->second.ready);
    cancel(id);
    ready();  // may mutate the store again: we hold no iterators across it
  }
}

}  // namespace lf::rdzv
