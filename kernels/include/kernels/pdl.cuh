// kernels/pdl.cuh: programmatic dependent launch (sm_90 and later). A kernel launched with
// pdl::launch may start before the kernel ahead of it on the stream has finished: its blocks are
// scheduled once every block of that kernel has called allow_dependents() (or exited), and they run
// until wait_for_prerequisite(), which returns when that kernel has completed and its writes are
// visible. What comes before the wait must touch nothing the kernel ahead writes: loads of
// weights, address arithmetic, shared-memory setup. Captured into a CUDA graph, the launch becomes
// a programmatic edge, and the overlap happens inside the graph too.
//   kernel:  prefetch inputs nothing upstream writes;  pdl::wait_for_prerequisite();
//            read upstream's outputs;  pdl::allow_dependents();  ...
//   host:    kernels::pdl::launch(kernel, grid, block, smem, stream, args...);
// Both device calls are no-ops in a kernel launched the ordinary way, so one kernel serves both.
// Correctness rests on every kernel of a programmatic chain calling wait_for_prerequisite before it
// reads (or overwrites) what the kernel ahead touches; a kernel that does not call it (a library's)
// is launched the ordinary way.
#pragma once

#include <cuda_runtime.h>

#include <bench/check.hpp>
#include <utility>

namespace kernels::pdl {

__device__ __forceinline__ void wait_for_prerequisite() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_smem,
            cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute overlap = {};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  BENCH_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace kernels::pdl
