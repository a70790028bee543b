#pragma once
// This node's status for node 0's live page (issue 35): when the layout asks for it
// (LayoutMsg::status_interval_ms > 0, i.e. node 0 serves the page), every interval and at each
// worker exit the agent sends a NodeStatusMsg over its rendezvous connection: each local rank
// (phase, step, heartbeat age, exit, its last progress record and last line), every GPU of the
// node (NVML through the metrics' GpuSampler: the exporter's when it runs, else one of its own,
// started once asked), global rank 0's progress beats and the output lines since the last one.
// Threading: the agent's io thread; the GPU sampler samples on its own thread.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/agent/worker_group.h"
#include "lf/metrics/gpu_sampler.h"
#include "lf/rendezvous/messages.h"

namespace lf::agent {

// The status of `group` (may be null: no workers yet). gpu_of_ordinal: the NVML index of each
// visible CUDA ordinal (lf/metrics/gpu_assignment.h); local rank r uses ordinal r mod its size.
rdzv::NodeStatusMsg node_status(WorkerGroup* group, int64_t generation, const std::vector<metrics::GpuSample>& gpus,
                                const std::string& gpu_note,
                                const std::vector<std::optional<unsigned>>& gpu_of_ordinal);

class StatusReporter {
 public:
  using Send = std::function<void(const rdzv::NodeStatusMsg&)>;

  StatusReporter(boost::asio::io_context& io, Send send);
  ~StatusReporter();
  // The metrics exporter's sampler (it outlives this reporter's use of it); else one of our own.
  void share_gpu_sampler(const metrics::GpuSampler* sampler) { shared_ = sampler; }
  // A new generation's workers (the group lives until the next begin()), and how often node 0
  // wants the status (0: never).
  void begin(WorkerGroup* group, int64_t generation, int64_t interval_ms);
  // One status now (a worker exited), when node 0 wants them at all.
  void send_now();
  void stop();

 private:
  void tick();
  std::vector<metrics::GpuSample> gpus(std::string* note);

  boost::asio::io_context& io_;
  Send send_;
  boost::asio::steady_timer timer_;
  WorkerGroup* group_ = nullptr;
  int64_t generation_ = 0;
  int64_t interval_ms_ = 0;
  const metrics::GpuSampler* shared_ = nullptr;
  std::unique_ptr<metrics::GpuSampler> own_;
  bool stopped_ = false;
};

}  // namespace lf::agent
