#!/usr/bin/env bash
# Tests of the launcher's own checks, on a copy of it in a sandboxed PATH whose cmake is a fake
# that records every call (issue 38):
#   - an unknown subcommand is refused (exit 2) naming the word and the subcommands, before the
#     dependency check and before any build (`./bench frobnicate` once built every target);
#   - `--chapter ..` or an unknown chapter is refused the same way (it once reached ninja);
#   - the launcher's list of subcommands equals the built program's (`bench --help`);
#   - a build with nothing to do prints nothing (ninja's glob re-check and "no work to do"),
#     while a failing build's output and the failure still show; the sources' sums are taken
#     before it (scripts/touch_changed.sh).
#
#   tests/launcher/subcommands_test.sh <source root> <built bench program>
set -uo pipefail
src="$(cd "${1:?usage: subcommands_test.sh <source root> <bench>}" && pwd)"
program="${2:?usage: subcommands_test.sh <source root> <bench>}"
real_env="$(command -v env)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/subcommands_test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL [$scenario]: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok   [$scenario]"; }

root="$tmp/root"
mkdir -p "$root/scripts" "$root/chapters/ch07"
cp "$src/bench" "$root/"
cp "$src/scripts/deps.sh" "$src/scripts/touch_changed.sh" "$root/scripts/"
: >"$root/chapters/ch07/CMakeLists.txt"

base="$tmp/base"
mkdir -p "$base"
ln -s -t "$base" /usr/bin/* 2>/dev/null
[ -L /bin ] || ln -s -t "$base" /bin/* 2>/dev/null
for p in cmake ctest ninja ninja-build nvcc apt-get dpkg-query; do rm -f "$base/$p"; done
bin="$tmp/bin"
mkdir -p "$bin"
fake() { printf '#!/bin/bash\n%s\n' "$2" >"$bin/$1"; chmod +x "$bin/$1"; }
# cmake: answers --version; a --build prints what ninja prints for a build with nothing to do,
# or (FAKE_BUILD=fail) a compile error; every call is recorded.
fake cmake "echo \"\$*\" >>'$tmp/cmake.calls'
[ \"\${1:-}\" = --version ] && { echo 'cmake version 3.28.3'; exit 0; }
if [ \"\${1:-}\" = --build ]; then
  echo '[0/2] Re-checking globbed directories...'
  if [ \"\${FAKE_BUILD:-}\" = fail ]; then echo 'FAILED: tools/x.o'; echo 'x.cpp:1:1: error: boom'; exit 1; fi
  echo 'ninja: no work to do.'
fi
exit 0"
fake ninja 'echo 1.11.1'
fake nvcc 'echo "Cuda compilation tools, release 13.0, V13.0.48"'

run_bench() {
  rm -f "$tmp/cmake.calls"
  "$real_env" -i HOME="${HOME:-$tmp}" TMPDIR="$tmp" PATH="$bin:$base" FAKE_BUILD="${FAKE_BUILD:-}" \
    bash "$root/bench" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out="$(cat "$tmp/out")"
  err="$(cat "$tmp/err")"
}
expect_contains() { [[ "$1" == *"$2"* ]] || fail "$3: expected '$2' in: $1"; }
nothing_ran() {
  [ ! -e "$tmp/cmake.calls" ] || fail "cmake was called: $(cat "$tmp/cmake.calls")"
  [ ! -e "$root/build" ] || fail "build/ was created"
}

# (a) An unknown subcommand: exit 2, the word and the list, nothing checked or built.
scenario=unknown_subcommand
before=$failures
run_bench frobnicate --chapter ch07
[ "$rc" = 2 ] || fail "exit $rc (expected 2), stderr: $err"
expect_contains "$err" "unknown subcommand 'frobnicate'" "stderr"
for word in list run compare expectations env calibrate profile sanitize report test deps; do
  expect_contains "$err" " $word" "stderr"
done
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "expected one line on stderr, got: $err"
nothing_ran
[ "$failures" = "$before" ] && pass

# (b) Not a chapter: `..` (once a ninja target), an unknown one, a misspelt one; exit 2 before
#     anything runs, whichever form the option takes.
scenario=not_a_chapter
before=$failures
for args in "compare --chapter .." "compare --chapter=.." "compare --chapter ch77" "run --chapter ch7" \
  "sanitize --chapter"; do
  # shellcheck disable=SC2086
  run_bench $args
  [ "$rc" = 2 ] || fail "$args: exit $rc (expected 2), stderr: $err"
  expect_contains "$err" "is not a chapter (chapters/ has: ch07" "$args: stderr"
  nothing_ran
done
[ "$failures" = "$before" ] && pass

# (c) The launcher's list is the program's: `bench --help` lists its subcommands.
scenario=same_subcommands
before=$failures
launcher_list="$(sed -n 's/^subcommands="\(.*\)"$/\1/p' "$src/bench" | tr ' ' '\n' | sort)"
program_list="$("$program" --help | awk 'tolower($0) ~ /^subcommands:$/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}' | sort)"
[ -n "$launcher_list" ] || fail "no subcommands=\"...\" line in $src/bench"
[ -n "$program_list" ] || fail "no subcommands in \`$program --help\`"
[ "$launcher_list" = "$program_list" ] ||
  fail "the launcher's subcommands ($(echo $launcher_list)) differ from the program's ($(echo $program_list))"
[ "$failures" = "$before" ] && pass

# (d) A configured build with nothing to build: the command's own output only. A failing build
#     still shows its error and fails.
scenario=quiet_no_op_build
before=$failures
mkdir -p "$root/build/default/tools"
: >"$root/build/default/build.ninja"
printf '#!/bin/bash\necho "program ran: $*"\n' >"$root/build/default/tools/bench"
chmod +x "$root/build/default/tools/bench"
run_bench env
[ "$rc" = 0 ] || fail "exit $rc, stderr: $err"
expect_contains "$out" "program ran: env" "stdout"
[ -z "$err" ] || fail "stderr not empty: $err"
expect_contains "$(cat "$tmp/cmake.calls" 2>/dev/null)" "--build" "cmake calls"
# Before the build the sources' sums are taken (scripts/touch_changed.sh): ch07's CMakeLists.txt.
grep -q ' chapters/ch07/CMakeLists.txt$' "$root/build/default/source_sums.txt" 2>/dev/null ||
  fail "no sums of the sources in build/default before the build"
FAKE_BUILD=fail run_bench env
[ "$rc" = 1 ] || fail "failing build: exit $rc (expected 1)"
expect_contains "$err" "x.cpp:1:1: error: boom" "failing build: stderr"
expect_contains "$err" "bench: build failed" "failing build: stderr"
[[ "$out" != *"program ran"* ]] || fail "the program ran after a failed build"
[ "$failures" = "$before" ] && pass

if [ "$failures" != 0 ]; then
  echo "subcommands_test: $failures failure(s)" >&2
  exit 1
fi
echo "subcommands_test: all scenarios passed"
