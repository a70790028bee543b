#pragma once
// Torch-free, CUDA-free declarations shared by the fused kernels' launchers (issue 15): the
// element types they take and the stream they run on. Each launcher (rms_norm.h, rope.h,
// swiglu.h) takes raw device pointers, sizes and a cudaStream_t passed as void*, so that
// callers need neither torch nor CUDA headers, and the .cu files need no torch headers.
//
// Contract of every launcher: asynchronous on `stream`; pointers are device memory of the
// current device; sizes of zero launch nothing; a bad argument or a failed launch throws
// lf::BackendError naming the kernel. Not thread-safe only in the sense of CUDA streams.
#include <cstdint>

namespace lf::kernels {

enum class DType : int32_t { kFloat32, kFloat16, kBFloat16 };

using Stream = void*;  // cudaStream_t

}  // namespace lf::kernels
