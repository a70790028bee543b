#pragma once
// A full mesh of TCP connections between the ranks of a job, set up through
// the job's key-value store; blocking, deadline-bound send/recv of bytes.
// Torch-free. One TcpMesh per communicator; not thread-safe (its owner runs
// every transfer on one thread).
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace lf::rdzv {
class StoreClient;
}

namespace lf::comm {

class TcpMesh {
 public:
  // Each rank listens, publishes host:port under `<prefix>/addr/<rank>`, then
  // connects to every lower rank and accepts every higher one.
  TcpMesh(rdzv::StoreClient& store, const std::string& prefix, int rank, int world, std::chrono::milliseconds timeout);
  ~TcpMesh();
  TcpMesh(const TcpMesh&) = delete;
  TcpMesh& operator=(const TcpMesh&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  // Sends to `to` while receiving from `from` (a ring step), both fully, without deadlock.
  void send_recv(int to, const void* send, size_t send_bytes, int from, void* recv, size_t recv_bytes);
  void send(int to, const void* data, size_t bytes);
  void recv(int from, void* data, size_t bytes);
  // Closes every socket: blocked transfers fail at once.
  void shutdown();

 private:
  int rank_, world_;
  std::chrono::milliseconds timeout_;
  std::vector<int> fds_;  // by peer rank; -1 for self
};

}  // namespace lf::comm
