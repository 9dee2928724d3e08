# Every dependency comes from the distribution. Minimum versions are those of Debian 12
# (benchmark 1.7.1, GTest 1.12, CLI11 2.1, fmt 9, nlohmann_json 3.11); Ubuntu 24.04 has newer.
# A missing package stops configure with one line naming the Debian package to install.
function(bench_require package version debian_package)
  find_package(${package} ${version} QUIET CONFIG)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "cudabench: ${package} >= ${version} not found; install it with: "
                        "apt-get install ${debian_package}")
  endif()
endfunction()

find_package(CUDAToolkit 12.4 REQUIRED)
bench_require(benchmark 1.7.1 libbenchmark-dev)
bench_require(nlohmann_json 3.11 nlohmann-json3-dev)
bench_require(CLI11 2.1 libcli11-dev)
bench_require(fmt 9 libfmt-dev)
if(BENCH_BUILD_TESTS)
  bench_require(GTest 1.12 libgtest-dev)
endif()

# Debian's CLI11 config names its target CLI11::CLI11 in both versions; be tolerant anyway.
if(NOT TARGET CLI11::CLI11 AND TARGET CLI11)
  add_library(CLI11::CLI11 ALIAS CLI11)
endif()
