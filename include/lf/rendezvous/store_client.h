#pragma once
// A blocking client of the job's key-value store, for workers and tools
// (no Asio, no threads). Every call has a deadline; errors are typed:
// NetworkError (connection), TimeoutError (deadline), RendezvousError (refused).
// Not thread-safe: one client per thread.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/rendezvous/frame.h"

namespace lf::rdzv {


class StoreClient {
 public:
  // Connects and authenticates (job id + LF_JOB_TOKEN), retrying connection
  // refusals until connect_timeout passes.
  StoreClient(const std::string& host, uint16_t port, const std::string& job_id, const std::string& token,
              std::chrono::milliseconds connect_timeout = std::chrono::seconds(30));
  // From the worker environment lf-train sets: LF_RDZV_ADDR, LF_RDZV_PORT, TORCHELASTIC_RUN_ID, LF_JOB_TOKEN.
  static StoreClient from_env();
  static std::unique_ptr<StoreClient> connect_from_env();  // the same, owned (held for a job's lifetime)
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, const std::string& value);
  std::optional<std::string> get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired);
  bool erase(const std::string& key);
  // Blocks until every key exists; TimeoutError naming the missing keys otherwise.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Blocks until `count` participants have arrived at barrier `name`. Use a new
  // name per use (e.g. with the generation and a step number in it).
  void barrier(const std::string& name, int64_t count, std::chrono::milliseconds timeout);

  // This host's address on the route to the store ("10.0.0.2"): reachable by the
  // other nodes, so collectives publish it as their own.
  std::string local_address() const;

  std::chrono::milliseconds request_timeout = std::chrono::seconds(60);

 private:
  struct Reply;
  Reply request(uint8_t op, std::vector<std::string> keys, std::string value, std::string expected, int64_t number,
                std::chrono::milliseconds timeout);
  void send_all(const std::string& bytes, std::chrono::steady_clock::time_point deadline);
  std::optional<Frame> read_frame(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string endpoint_;
  uint64_t next_request_ = 1;
  FrameParser parser_;
};

}  // namespace lf::rdzv
