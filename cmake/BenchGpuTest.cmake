# bench_add_gpu_test(<name> [ALL_GPUS] COMMAND <command> [args...])
#
# Registers a ctest test that runs on the GPU. The caller sets its LABELS, skip code and timeout.
#
# A test that needs one GPU takes a slot of ctest's "gpus" resource (RESOURCE_GROUPS) and runs
# under scripts/on_ctest_gpu.sh, which points CUDA_VISIBLE_DEVICES at the GPU ctest gave it, so
# tests on different GPUs of one machine run side by side and never share a GPU. A test that
# needs every GPU (NCCL, peer copies, calibrate's links) takes ALL_GPUS and runs alone
# (RUN_SERIAL: nothing else runs beside it).
#
# How many slots there are is the resource spec's business. The build's own spec
# (<build>/gpu_slots.json, written here) has one, so a plain `ctest -j` runs one GPU test at a
# time on the first visible GPU, safe on any machine; `./bench test` writes a spec with a slot per
# GPU it finds (scripts/gpu_slots.sh) and passes it with --resource-spec-file.
set(BENCH_GPU_TEST_LAUNCHER "${CMAKE_CURRENT_LIST_DIR}/../scripts/on_ctest_gpu.sh")
cmake_path(NORMAL_PATH BENCH_GPU_TEST_LAUNCHER)
file(WRITE "${CMAKE_BINARY_DIR}/gpu_slots.json"
     "{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"gpus\": [{\"id\": \"0\"}]}]}\n")
# Read by ctest from the top-level CTestTestfile.cmake: a spec when the command line gives none.
set(CTEST_RESOURCE_SPEC_FILE "${CMAKE_BINARY_DIR}/gpu_slots.json")

function(bench_add_gpu_test name)
  cmake_parse_arguments(ARG "ALL_GPUS" "" "COMMAND" ${ARGN})
  if(NOT ARG_COMMAND)
    message(FATAL_ERROR "bench_add_gpu_test(${name}): COMMAND is required")
  endif()
  if(ARG_ALL_GPUS)
    add_test(NAME ${name} COMMAND ${ARG_COMMAND})
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  else()
    add_test(NAME ${name} COMMAND bash "${BENCH_GPU_TEST_LAUNCHER}" ${ARG_COMMAND})
    set_tests_properties(${name} PROPERTIES RESOURCE_GROUPS "gpus:1")
  endif()
endfunction()
