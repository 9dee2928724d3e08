#!/usr/bin/env bash
# scripts/touch_changed.sh BUILD_DIR [ROOT]: before a build in BUILD_DIR, touch every source file
# of ROOT (default: this checkout) whose content changed since the last build there, so that
# ninja sees it as new. The launcher runs it before each build; so does scripts/gpu_jobs.py.
#
# Why: ninja rebuilds what is older than its sources by modification time. The device machines
# copy the working tree with each file's own time, which can be older than the objects an earlier
# call built there from other contents: the changed file then looks up to date, and the old
# objects run (an A/B once measured the old kernels under the new names that way). Content sums,
# kept in BUILD_DIR/source_sums.txt, do not depend on anyone's clock. A build folder without sums
# (its first build, or one made before this script) gets them written and nothing touched.
set -euo pipefail
build="${1:?usage: touch_changed.sh BUILD_DIR [ROOT]}"
root="${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
[ -d "$build" ] || exit 0  # nothing built there yet: nothing can look up to date
sums="$build/source_sums.txt"
fresh="$(mktemp "${TMPDIR:-/tmp}/source_sums.XXXXXX")"
trap 'rm -f "$fresh"' EXIT

# What the build reads: the CMake files and every C++ and CUDA source under the project's folders.
sources=()
for path in CMakeLists.txt CMakePresets.json cmake harness kernels chapters tools calibrate tests; do
  [ -e "$root/$path" ] && sources+=("$path")
done
(cd "$root" && find "${sources[@]}" -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
  -o -name '*.hpp' -o -name '*.h' -o -name '*.in' -o -name '*.cmake' -o -name 'CMakeLists.txt' \
  -o -name 'CMakePresets.json' \) -print0 | LC_ALL=C sort -z | xargs -0 -r sha1sum) >"$fresh"

if [ -f "$sums" ]; then
  # A line of the fresh sums that the old ones lack: a file changed or new since the last build
  # (sha1sum writes 40 hex digits and two spaces before the path).
  LC_ALL=C comm -13 <(LC_ALL=C sort "$sums") <(LC_ALL=C sort "$fresh") | cut -c43- |
    while IFS= read -r path; do touch -c "$root/$path"; done
fi
mv "$fresh" "$sums"
trap - EXIT
