// kernels/arch.cuh: which architecture-specific instructions the current device pass may use.
// wgmma and setmaxnreg exist on sm_90a only: ptxas rejects them for any other target, a
// Blackwell's sm_100a included. A kernel that uses them puts its body under
//   #if BENCH_SM90A_DEVICE ... #endif
// so that a build for another target still compiles (with an empty body there), and its variant
// declares {.arch_specific = 90}, so the harness SKIPs it, with the reason, wherever that empty
// body would otherwise run.
#pragma once

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BENCH_SM90A_DEVICE 1
#else
#define BENCH_SM90A_DEVICE 0
#endif
