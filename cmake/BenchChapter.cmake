# bench_add_chapter(<chNN> [LIBRARIES lib...] [SMOKE_FILTER regex] [RELOCATABLE_DEVICE_CODE] [ALL_GPUS])
#
# ALL_GPUS: the smoke run uses every GPU of the machine (NCCL, peer links), so it runs alone
# instead of on one GPU beside other tests (cmake/BenchGpuTest.cmake).
#
# RELOCATABLE_DEVICE_CODE builds the chapter with -rdc=true (CMake adds the device link and
# cudadevrt), for device-side launches (dynamic parallelism); it costs a device-link step, so
# only chapters that need it ask for it.
#
# Builds every .cu/.cpp file in the calling folder into one executable named <chNN>, linked
# with the harness's main(), and registers a short smoke run of it as a ctest test labelled
# `chapter`. Adding an example is adding a file: no per-example CMake.
set(BENCH_SKIP_RETURN_CODE 77)

# Flags every piece of device code gets, set once: line info for Nsight, spill warnings so a
# register-heavy kernel never spills unnoticed, and relaxed constexpr for std:: in kernels.
add_library(bench_cuda_flags INTERFACE)
add_library(bench::cuda_flags ALIAS bench_cuda_flags)
target_compile_options(bench_cuda_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xptxas=--warn-on-spills --expt-relaxed-constexpr>)

function(bench_add_chapter chapter)
  cmake_parse_arguments(ARG "RELOCATABLE_DEVICE_CODE;ALL_GPUS" "SMOKE_FILTER" "LIBRARIES" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cu"
                                      "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp")
  add_executable(${chapter} ${sources})
  target_link_libraries(${chapter} PRIVATE bench::main bench::kernels bench::cuda_flags ${ARG_LIBRARIES})
  if(ARG_RELOCATABLE_DEVICE_CODE)
    set_target_properties(${chapter} PROPERTIES CUDA_SEPARABLE_COMPILATION ON CUDA_RESOLVE_DEVICE_SYMBOLS ON)
  else()
    set_target_properties(${chapter} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  endif()
  if(BENCH_BUILD_TESTS)
    if(NOT ARG_SMOKE_FILTER)
      set(ARG_SMOKE_FILTER ".")
    endif()
    # A smoke run: every case verified, few samples, short timeout. Without a GPU the binary
    # exits with BENCH_SKIP_RETURN_CODE and ctest reports the test as skipped. Each case's phase
    # times (verify, warmup, samples, final_check...) land in <build>/smoke/<chapter>/, to find
    # where `./bench test`'s GPU time goes (most of it is in these tests).
    set(all_gpus "")
    if(ARG_ALL_GPUS)
      set(all_gpus ALL_GPUS)
    endif()
    bench_add_gpu_test(chapter.${chapter} ${all_gpus}
      COMMAND $<TARGET_FILE:${chapter}> --benchmark_filter=${ARG_SMOKE_FILTER} --bench_smoke
              --bench_samples_out=${CMAKE_BINARY_DIR}/smoke/${chapter})
    set_tests_properties(chapter.${chapter} PROPERTIES
      LABELS "chapter;gpu" SKIP_RETURN_CODE ${BENCH_SKIP_RETURN_CODE} TIMEOUT 900)
  endif()
endfunction()
