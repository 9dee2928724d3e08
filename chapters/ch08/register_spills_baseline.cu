// ch08/register_spills_baseline.cu: the spilling instance of register_spills, alone in its
// translation unit.
//
// The suite compiles all device code with -Xptxas=--warn-on-spills, so that no kernel spills
// unnoticed, and the build must be free of warnings. This one kernel spills on purpose: it is
// the example's baseline. ptxas switches warnings on or off per translation unit, not per
// kernel, so the kernel is compiled here by itself, and chapters/ch08/CMakeLists.txt gives this
// one file -Xptxas=--disable-warnings (nothing else in the chapter or the suite) together with
// -Xptxas=--verbose, so that every build still prints the spill in ptxas's report:
//   344 bytes stack frame, 864 bytes spill stores, 784 bytes spill loads
//   ptxas info    : Used 32 registers, used 0 barriers, 344 bytes cumulative stack size
// The optimized instance stays in register_spills.cu, under the suite's spill warning.
#include "register_spills.cuh"

namespace ch08 {

constexpr int kSpillingItems = 16;  // 48 live floats per thread against a 32-register budget

void launch_spilling_chains(const float* x, float* y, int64_t n, int steps, cudaStream_t stream) {
  launch_chains<kSpillingItems>(x, y, n, steps, stream);
}

}  // namespace ch08
