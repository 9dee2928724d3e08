# bench_python_self_test(<test name> <script> <timeout>)
#
# A Python script run on its own built-in inputs (`<script> --self-test`), as a ctest test
# labelled tools: the scripts' parsers (scripts/) and the host emulations of kernels' fragment
# mappings (chapters/ch19, chapters/ch20), none of which needs a GPU. Nothing is registered
# where no Python 3 interpreter is found or tests are not built.
find_package(Python3 COMPONENTS Interpreter QUIET)

function(bench_python_self_test name script timeout)
  if(NOT BENCH_BUILD_TESTS OR NOT Python3_Interpreter_FOUND)
    return()
  endif()
  add_test(NAME ${name} COMMAND "${Python3_EXECUTABLE}" "${script}" --self-test)
  set_tests_properties(${name} PROPERTIES LABELS tools TIMEOUT ${timeout})
endfunction()
