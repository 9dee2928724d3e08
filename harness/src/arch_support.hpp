// Internal: whether a variant that uses architecture-specific instructions can run here.
// sm_90a code (wgmma, setmaxnreg) runs on compute capability 9.0 only, and exists only in a
// build whose CUDA architectures include 90a: elsewhere its kernels are compiled empty
// (kernels/arch.cuh), so the variant must be SKIPPED with the reason, never run.
#pragma once

#include <string>
#include <string_view>

namespace bench::detail {

// Why a variant needing the `arch`a target (90 for sm_90a) cannot run on a GPU of compute
// capability `cc` (e.g. 90) named `gpu`, from a build for `built_archs` (CMake's list, such as
// "90a" or "90a;100a"); "" when it can.
std::string arch_specific_reason(int arch, int cc, std::string_view gpu, std::string_view built_archs);

}  // namespace bench::detail
