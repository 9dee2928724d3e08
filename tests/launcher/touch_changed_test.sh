#!/usr/bin/env bash
# Tests of scripts/touch_changed.sh on a made-up checkout whose files carry old times, as the
# device machines' copies of a working tree can:
#   - a build folder that does not exist: nothing written, nothing touched;
#   - the first run writes the sums and touches nothing;
#   - a file whose content changed, and a new file, are touched even with a time older than the
#     last build's; an unchanged file keeps its time; a file outside the project's folders is not
#     summed.
# That the launcher and scripts/gpu_jobs.py run it before a build: subcommands_test.sh and
# gpu_jobs.py --self-test.
#
#   tests/launcher/touch_changed_test.sh <source root>
set -uo pipefail
src="$(cd "${1:?usage: touch_changed_test.sh <source root>}" && pwd)"
script="$src/scripts/touch_changed.sh"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/touch_changed_test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL [$scenario]: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok   [$scenario]"; }
old() { touch -d 2001-01-01 "$@"; }
is_old() { [ "$(stat -c %Y "$1")" -lt 1000000000 ]; }

root="$tmp/root" build="$tmp/root/build/default"
mkdir -p "$root/chapters/ch01" "$root/tools" "$root/docs"
echo 'a' >"$root/chapters/ch01/a.cu"
echo 'b' >"$root/tools/b.cpp"
echo 'notes' >"$root/docs/notes.cpp"
echo 'project(x)' >"$root/CMakeLists.txt"

scenario="no build folder"
bash "$script" "$tmp/nowhere" "$root" || fail "exit $?"
[ ! -e "$tmp/nowhere" ] || fail "it made the folder"
[ "$failures" = 0 ] && pass

scenario="first run"
mkdir -p "$build"
old "$root/chapters/ch01/a.cu" "$root/tools/b.cpp"
bash "$script" "$build" "$root" || fail "exit $?"
[ -f "$build/source_sums.txt" ] || fail "no sums written"
grep -q ' chapters/ch01/a.cu$' "$build/source_sums.txt" || fail "a.cu not summed"
grep -q 'notes' "$build/source_sums.txt" && fail "docs/ summed"
is_old "$root/chapters/ch01/a.cu" || fail "a.cu touched on the first run"
[ "$failures" = 0 ] && pass

scenario="changed and new files, old times"
echo 'a, changed' >"$root/chapters/ch01/a.cu"
echo 'c' >"$root/chapters/ch01/c.cuh"
old "$root/chapters/ch01/a.cu" "$root/chapters/ch01/c.cuh" "$root/tools/b.cpp"
bash "$script" "$build" "$root" || fail "exit $?"
is_old "$root/chapters/ch01/a.cu" && fail "the changed a.cu kept its old time"
is_old "$root/chapters/ch01/c.cuh" && fail "the new c.cuh kept its old time"
is_old "$root/tools/b.cpp" || fail "the unchanged b.cpp was touched"
old "$root/chapters/ch01/a.cu"
bash "$script" "$build" "$root" || fail "exit $?"
is_old "$root/chapters/ch01/a.cu" || fail "a.cu touched again with no change since"
[ "$failures" = 0 ] && pass

[ "$failures" = 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
