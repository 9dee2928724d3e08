// harness/src/workload.cpp: the CPU reference reads each input as the type it was declared with;
// an FP32 device reference finds the arrays it writes by output name.
#include "workload.hpp"

#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <gtest/gtest.h>

namespace {

bench::detail::HostBuffers one_float_input() {
  bench::detail::HostBuffers buffers;
  auto& in = buffers.inputs["in"];
  in.dtype = bench::DType::f32;
  in.bytes = bench::detail::HostArray<std::byte>(4 * sizeof(float));
  return buffers;
}

TEST(HostData, AnInputReadAsItsDeclaredTypeHasItsElementCount) {
  auto buffers = one_float_input();
  bench::detail::HostDataImpl impl(buffers);
  bench::HostData h(impl);
  EXPECT_EQ(h.input<float>("in").size(), 4u);
}

// A reference reading FP32 bits as BF16 would compare garbage it computed itself.
TEST(HostData, AnInputReadAsAnotherTypeIsAnErrorNamingBoth) {
  auto buffers = one_float_input();
  bench::detail::HostDataImpl impl(buffers);
  bench::HostData h(impl);
  try {
    (void)h.input<__nv_bfloat16>("in");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("reference read input 'in' as bf16, but it holds f32"), std::string::npos)
        << e.what();
  }
}

TEST(HostData, AnUnknownInputIsAnError) {
  auto buffers = one_float_input();
  bench::detail::HostDataImpl impl(buffers);
  bench::HostData h(impl);
  EXPECT_THROW((void)h.input<float>("missing"), std::invalid_argument);
}

// The FP32 form of a device reference finds each output's array by name; a name the workload
// lacks is an error naming it, not a null pointer the kernel would write through.
TEST(ReferenceOutputs, AnOutputIsFoundByNameAndAnUnknownOneIsAnErrorNamingIt) {
  float y[2], z[3];
  const bench::ReferenceOutputs out{{{"y", y}, {"z", z}}};
  EXPECT_EQ(out["y"], y);
  EXPECT_EQ(out["z"], z);
  try {
    (void)out["w"];
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("device reference asked for unknown output 'w'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
