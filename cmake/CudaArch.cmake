# Chooses CMAKE_CUDA_ARCHITECTURES once for the whole tree.
#   - an explicit -DCMAKE_CUDA_ARCHITECTURES wins;
#   - BENCH_ARCH=native asks nvidia-smi for the local GPU (the `default` preset);
#   - otherwise sm_90a, the Hopper target with wgmma/setmaxnreg, so every kernel compiles in CI.
# "90a" must be spelled as an architecture-specific target: CMake turns it into
# -gencode=arch=compute_90a,code=[compute_90a,sm_90a].
set(BENCH_ARCH "90a" CACHE STRING "CUDA architecture: a number such as 90a or 100a, or 'native'")

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(_bench_arch "${BENCH_ARCH}")
  if(_bench_arch STREQUAL "native")
    set(_bench_arch "90a")
    find_program(_bench_nvidia_smi nvidia-smi)
    if(_bench_nvidia_smi)
      execute_process(COMMAND ${_bench_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
                      OUTPUT_VARIABLE _cap RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(_rc EQUAL 0 AND _cap MATCHES "^([0-9]+)\\.([0-9]+)")
        set(_num "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
        # Hopper and Blackwell data-centre parts get their architecture-specific target.
        if(_num STREQUAL "90" OR _num STREQUAL "100" OR _num STREQUAL "103")
          set(_bench_arch "${_num}a")
        else()
          set(_bench_arch "${_num}")
        endif()
      endif()
    endif()
    message(STATUS "cudabench: local GPU architecture: ${_bench_arch}")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_bench_arch}" CACHE STRING "CUDA architectures" FORCE)
endif()
