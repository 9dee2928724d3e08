# bench_find_library(<PREFIX> HEADER <file.h> NAMES <name>... WHEEL <python module>... [ROOT <folder>])
#
# Finds an optional NVIDIA library (NCCL for ch04, cuFile for ch05) and sets <PREFIX>_INCLUDE_DIR
# and <PREFIX>_LIBRARY (NOTFOUND when missing: the caller decides what is not built). With ROOT
# set, only under that folder (include/, lib/); otherwise in order: the CUDA toolkit's folders, the
# system's (CMake's default paths), then the toolkit's root and the Python wheel that ships the
# library (`import nvidia.nccl`: site-packages/nvidia/nccl), which is where the GPU machines'
# PyTorch environment keeps it. WHEEL may name several modules, looked in in that order: CUDA 13's
# wheels share one folder, site-packages/nvidia/cu13 (`nvidia.cu13`), where CUDA 12's had one each.
function(bench_find_library prefix)
  cmake_parse_arguments(ARG "" "HEADER;ROOT" "NAMES;WHEEL" ${ARGN})
  if(ARG_ROOT)
    set(hints "${ARG_ROOT}")
    set(paths)
    set(only_there NO_DEFAULT_PATH)
  else()
    set(hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR})
    set(paths "${CUDAToolkit_LIBRARY_ROOT}" "${CUDAToolkit_TARGET_DIR}")
    set(only_there)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      foreach(module IN LISTS ARG_WHEEL)
        execute_process(
          COMMAND "${Python3_EXECUTABLE}" -c "import ${module}, os; print(os.path.dirname(${module}.__file__) if ${module}.__file__ else list(${module}.__path__)[0])"
          OUTPUT_VARIABLE wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE wheel_rc)
        if(wheel_rc EQUAL 0 AND wheel)
          list(APPEND paths "${wheel}")
        endif()
      endforeach()
    endif()
  endif()
  find_path(${prefix}_INCLUDE_DIR ${ARG_HEADER} HINTS ${hints} PATHS ${paths} PATH_SUFFIXES include ${only_there})
  find_library(${prefix}_LIBRARY NAMES ${ARG_NAMES} HINTS ${hints} PATHS ${paths} PATH_SUFFIXES lib lib64 ${only_there})
endfunction()

# bench_configure_check(<test name> <expected output regex> <cmake args...>): a `unit` test that
# configures this source tree into a scratch folder (the other tests' build settings, no tests of
# its own) with the given arguments, e.g. an optional library looked for where there is none. The
# configure must succeed and print the expected line (why a chapter or a rung is not built).
function(bench_configure_check name expected)
  set(scratch "${CMAKE_CURRENT_BINARY_DIR}/${name}")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} --fresh -S "${PROJECT_SOURCE_DIR}" -B "${scratch}" -G "${CMAKE_GENERATOR}"
                   -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE} -DBENCH_ARCH=${BENCH_ARCH} -DBENCH_BUILD_TESTS=OFF
                   -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER} -DCMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 180
    PASS_REGULAR_EXPRESSION "${expected}" FAIL_REGULAR_EXPRESSION "CMake Error|Configuring incomplete")
endfunction()
