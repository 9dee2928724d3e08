// Internal: the examples BENCH_EXAMPLE registered.
#pragma once

#include <memory>
#include <vector>

#include "bench/bench.hpp"

namespace bench::detail {

std::vector<std::unique_ptr<ExampleDef>>& registry();
// Every example, ordered by chapter then name (registration order across files is unspecified).
std::vector<const ExampleDef*> sorted_examples();

}  // namespace bench::detail
