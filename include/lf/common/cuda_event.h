#pragma once
// A timing-free CUDA event (cheap to record, wait on and query), for the CUDA-only sources
// (LF_WITH_CUDA): the NCCL communicator's collectives and ZeRO-Offload's copy streams. Not
// ATen's CUDAEvent: its header pulls in cuBLAS and cuSPARSE. Waiting on an event never
// recorded returns at once (CUDA's rule), so a fresh one reads as done.
#include <cuda_runtime_api.h>

#include "lf/common/error.h"

namespace lf {

class CudaEvent {
 public:
  CudaEvent() { check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); }
  ~CudaEvent() { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  void record(cudaStream_t s) { check(cudaEventRecord(event_, s), "cudaEventRecord"); }
  // s waits on the device for the last record.
  void block(cudaStream_t s) const { check(cudaStreamWaitEvent(s, event_, 0), "cudaStreamWaitEvent"); }
  bool query() const { return cudaEventQuery(event_) == cudaSuccess; }

 private:
  static void check(cudaError_t rc, const char* what) {
    LF_CHECK(rc == cudaSuccess, BackendError, "{} failed: {}", what, cudaGetErrorString(rc));
  }
  cudaEvent_t event_ = nullptr;
};

}  // namespace lf
