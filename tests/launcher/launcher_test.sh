#!/usr/bin/env bash
# Tests of the launcher's dependency check (./bench deps, scripts/deps.sh), run on a copy of the
# launcher in a sandboxed PATH: /usr/bin less apt, dpkg, cmake, ninja, make, nvcc and id, plus
# per-scenario fakes of those. The libraries are this machine's real ones, as find_package sees
# them; a "missing" one is hidden from find_package by the fake cmake.
#
#   tests/launcher/launcher_test.sh <source root> [<real cmake>]
set -uo pipefail
src="$(cd "${1:?usage: launcher_test.sh <source root> [cmake]}" && pwd)"
real_cmake="${2:-$(command -v cmake)}"
real_ninja="$(command -v ninja)" || { echo "launcher_test: ninja not on PATH" >&2; exit 1; }
real_env="$(command -v env)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/launcher_test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL [$scenario]: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok   [$scenario] $(tail -1 "$tmp/err" 2>/dev/null || true)"; }

# A copy of what the launcher's dependency path reads.
root="$tmp/root"
mkdir -p "$root/scripts" "$root/cmake"
cp "$src/bench" "$root/"
cp "$src/scripts/deps.sh" "$root/scripts/"
cp -r "$src/cmake/Dependencies.cmake" "$src/cmake/probe-deps" "$root/cmake/"

# The base PATH: every program of /usr/bin (and /bin where it is separate) but the ones faked.
base="$tmp/base"
mkdir -p "$base"
ln -s -t "$base" /usr/bin/* 2>/dev/null
[ -L /bin ] || ln -s -t "$base" /bin/* 2>/dev/null
for p in apt apt-get apt-cache dpkg dpkg-query cmake ctest cpack ninja ninja-build samu make gmake \
  nvcc id sudo mpicxx mpirun; do
  rm -f "$base/$p"
done

# Fakes, written into a scenario's own bin/ folder ahead of the base PATH.
fake() {  # fake <dir> <name> <body>
  printf '#!/bin/bash\n%s\n' "$3" >"$1/$2"
  chmod +x "$1/$2"
}
fake_id() { fake "$1" id 'if [ "${1:-}" = -u ]; then echo "${FAKE_UID:-0}"; else echo "uid=${FAKE_UID:-0}"; fi'; }
fake_nvcc() { fake "$1" nvcc 'echo "Cuda compilation tools, release 13.0, V13.0.48"'; }
fake_dpkg_nothing() { fake "$1" dpkg-query 'exit 1'; }  # "no package is installed"
fake_apt_failing() {  # records every call, fails as with no network
  fake "$1" apt-get "echo \"\$*\" >>'$tmp/apt.calls'; echo 'E: Temporary failure resolving deb.debian.org' >&2; exit 100"
}
fake_cmake() {  # fake_cmake <dir> [<version it claims>] [<package hidden from find_package>]
  local version="${2:-}" hide="${3:-}"
  fake "$1" cmake "
if [ -n '$version' ] && [ \"\${1:-}\" = --version ]; then echo 'cmake version $version'; exit 0; fi
if [ -n '$hide' ]; then
  case \" \$* \" in *probe-deps*) exec '$real_cmake' \"\$@\" -DCMAKE_DISABLE_FIND_PACKAGE_$hide=TRUE ;; esac
fi
exec '$real_cmake' \"\$@\""
}
fake_ninja() { fake "$1" ninja "exec '$real_ninja' \"\$@\""; }

# A fresh scenario: its bin/ folder, its own copy of the launcher's tree, no apt calls yet.
new_scenario() {
  scenario="$1"
  : >"$tmp/err"
  bin="$tmp/$scenario/bin"
  mkdir -p "$bin"
  rm -f "$tmp/apt.calls"
  rm -rf "$root/build"
}
# Runs `./bench deps` (or "$@") in the sandbox; sets rc, out, err.
run_bench() {
  "$real_env" -i HOME="${HOME:-$tmp}" TMPDIR="$tmp" PATH="$bin:$base" FAKE_UID="${FAKE_UID:-0}" \
    bash "$root/bench" "${@:-deps}" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out="$(cat "$tmp/out")"
  err="$(cat "$tmp/err")"
}
expect_contains() {  # expect_contains <text> <needle> <what>
  [[ "$1" == *"$2"* ]] || fail "$3: expected '$2' in: $1"
}
expect_no_apt() { [ ! -e "$tmp/apt.calls" ] || fail "apt-get was called: $(cat "$tmp/apt.calls")"; }
one_line() {  # the failure message: exactly one line on stderr starting "bench: missing"
  [ "$(grep -c '^bench: missing' <<<"$err")" = 1 ] || fail "expected one 'bench: missing' line, got: $err"
}

libraries=$(sed -n 's/^[[:space:]]*bench_require(\([A-Za-z0-9_]*\) .*/\1/p' "$src/cmake/Dependencies.cmake")
[ "$(wc -w <<<"$libraries")" -ge 5 ] || { echo "FAIL: cannot read bench_require() lines" >&2; exit 1; }

# (a) The GPU machine: pip's cmake and ninja, root, dpkg knows none of them, apt-get offline.
#     Everything the build needs is there, so nothing may be installed.
new_scenario gpu_machine
fake_id "$bin"; fake_nvcc "$bin"; fake_dpkg_nothing "$bin"; fake_apt_failing "$bin"
fake_cmake "$bin"; fake_ninja "$bin"
run_bench
[ "$rc" = 0 ] || fail "exit $rc, stderr: $err"
expect_contains "$out" "bench: dependencies ok:" "stdout"
for lib in $libraries; do expect_contains "$out" "$lib " "found libraries"; done
expect_no_apt
[ -z "$err" ] || fail "stderr not empty: $err"
[ "$failures" = 0 ] && pass

# (a') A configured build (build/<preset>/build.ninja) skips the probe: a cmake that cannot
#      configure anything is not asked to.
new_scenario configured
fake_id "$bin"; fake_nvcc "$bin"; fake_dpkg_nothing "$bin"; fake_apt_failing "$bin"; fake_ninja "$bin"
fake "$bin" cmake "case \" \$* \" in *probe-deps*) echo probed >>'$tmp/probe.calls'; exit 1 ;; esac; exec '$real_cmake' \"\$@\""
mkdir -p "$root/build/default" && : >"$root/build/default/build.ninja"
before=$failures
"$real_env" -i HOME="${HOME:-$tmp}" TMPDIR="$tmp" PATH="$bin:$base" bash -c \
  "set -euo pipefail; root='$root'; build='$root/build/default'; source '$root/scripts/deps.sh'; deps_ensure" \
  >"$tmp/out" 2>"$tmp/err" || fail "deps_ensure failed: $(cat "$tmp/err")"
[ ! -e "$tmp/probe.calls" ] || fail "the probe ran although build/default had configured"
expect_no_apt
[ "$failures" = "$before" ] && pass

# (b) A missing library on a machine without apt-get: one line naming it and its package.
new_scenario missing_library_no_apt
fake_id "$bin"; fake_nvcc "$bin"; fake_cmake "$bin" "" benchmark; fake_ninja "$bin"
before=$failures
run_bench
[ "$rc" = 1 ] || fail "exit $rc (expected 1), stderr: $err"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "expected exactly one line on stderr, got: $err"
one_line
expect_contains "$err" "benchmark >= 1.7.1" "message"
expect_contains "$err" "libbenchmark-dev" "message"
expect_contains "$err" "no apt-get" "message"
for lib in $libraries; do
  [ "$lib" = benchmark ] || [[ "$err" != *"$lib >="* ]] || fail "$lib reported missing: $err"
done
[ "$failures" = "$before" ] && pass

# (b') The same as a user (not root) where apt-get exists: the sudo line, nothing installed.
new_scenario missing_library_user
fake_id "$bin"; fake_nvcc "$bin"; fake_cmake "$bin" "" benchmark; fake_ninja "$bin"; fake_apt_failing "$bin"
before=$failures
FAKE_UID=1000 run_bench
[ "$rc" = 1 ] || fail "exit $rc (expected 1)"
one_line
expect_contains "$err" "sudo apt-get install -y libbenchmark-dev" "message"
expect_no_apt
[ "$failures" = "$before" ] && pass

# (b'') The same as root with apt-get offline: it tries, then says what to install.
new_scenario missing_library_apt_offline
fake_id "$bin"; fake_nvcc "$bin"; fake_cmake "$bin" "" fmt; fake_ninja "$bin"; fake_apt_failing "$bin"
before=$failures
run_bench
[ "$rc" = 1 ] || fail "exit $rc (expected 1)"
one_line
expect_contains "$err" "fmt >= 9" "message"
expect_contains "$err" "apt-get failed" "message"
expect_contains "$err" "apt-get install -y libfmt-dev" "message"
[ -e "$tmp/apt.calls" ] || fail "apt-get was not tried"
[ "$failures" = "$before" ] && pass

# (c) A too-old cmake: reported with the version found, and the pip route; libraries still checked.
new_scenario old_cmake
fake_id "$bin"; fake_nvcc "$bin"; fake_cmake "$bin" 3.22.1; fake_ninja "$bin"
before=$failures
run_bench
[ "$rc" = 1 ] || fail "exit $rc (expected 1)"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "expected exactly one line on stderr, got: $err"
one_line
expect_contains "$err" "cmake >= 3.25 (found 3.22.1" "message"
expect_contains "$err" "pip install cmake ninja" "message"
for lib in $libraries; do [[ "$err" != *"$lib >="* ]] || fail "$lib reported missing: $err"; done
[ "$failures" = "$before" ] && pass

# (c') The same as root where apt-get works but its cmake is as old (Ubuntu 22.04's is 3.22):
#      it tries once, then points to pip.
new_scenario old_cmake_apt
fake_id "$bin"; fake_nvcc "$bin"; fake_cmake "$bin" 3.22.1; fake_ninja "$bin"
fake "$bin" apt-get "echo \"\$*\" >>'$tmp/apt.calls'"
before=$failures
run_bench
[ "$rc" = 1 ] || fail "exit $rc (expected 1)"
one_line
expect_contains "$err" "cmake >= 3.25 (found 3.22.1" "message"
expect_contains "$err" "was not enough" "message"
expect_contains "$err" "pip install cmake ninja" "message"
[ "$(grep -c install "$tmp/apt.calls" 2>/dev/null)" = 1 ] || fail "expected one apt-get install: $(cat "$tmp/apt.calls" 2>/dev/null)"
[ "$failures" = "$before" ] && pass

# (d) A fresh Debian machine as root, offline: no cmake, no ninja; dpkg's view names the
#     libraries until cmake can probe them. apt-get is tried once, then one line names everything.
new_scenario fresh_offline
fake_id "$bin"; fake_nvcc "$bin"; fake_dpkg_nothing "$bin"; fake_apt_failing "$bin"
before=$failures
run_bench
[ "$rc" = 1 ] || fail "exit $rc (expected 1)"
one_line
expect_contains "$err" "cmake >= 3.25" "message"
expect_contains "$err" "ninja" "message"
for lib in $libraries; do expect_contains "$err" "$lib >=" "message"; done
expect_contains "$err" "apt-get install -y cmake ninja-build" "message"
[ "$(grep -c . "$tmp/apt.calls" 2>/dev/null)" = 1 ] || fail "expected one apt-get call (update): $(cat "$tmp/apt.calls" 2>/dev/null)"
[ "$failures" = "$before" ] && pass

# (e) A fresh machine as root where apt-get works (CI): it installs cmake and ninja (and, by
#     dpkg's view, the libraries), then probes and goes on.
new_scenario fresh_ci
fake_id "$bin"; fake_nvcc "$bin"; fake_dpkg_nothing "$bin"
fake "$bin" apt-get "
echo \"\$*\" >>'$tmp/apt.calls'
for p in \"\$@\"; do
  case \"\$p\" in
    cmake) printf '#!/bin/bash\nexec %s \"\$@\"\n' '$real_cmake' >'$bin/cmake'; chmod +x '$bin/cmake' ;;
    ninja-build) printf '#!/bin/bash\nexec %s \"\$@\"\n' '$real_ninja' >'$bin/ninja'; chmod +x '$bin/ninja' ;;
  esac
done"
before=$failures
run_bench
[ "$rc" = 0 ] || fail "exit $rc, stderr: $err"
expect_contains "$out" "bench: dependencies ok:" "stdout"
expect_contains "$(cat "$tmp/apt.calls" 2>/dev/null)" "install -y -qq cmake ninja-build" "apt-get calls"
[ "$(grep -c install "$tmp/apt.calls" 2>/dev/null)" = 1 ] || fail "expected one apt-get install: $(cat "$tmp/apt.calls")"
[ "$failures" = "$before" ] && pass

# (f) `./bench test`'s optional Open MPI (deps_mpi, for ch04_mpi): absent, as root with apt-get,
#     it installs libopenmpi-dev and openmpi-bin; with apt-get offline it says so and succeeds.
new_scenario mpi_optional
fake_id "$bin"
fake "$bin" apt-get "echo \"\$*\" >>'$tmp/apt.calls'"
before=$failures
mpi_run() {
  "$real_env" -i HOME="${HOME:-$tmp}" TMPDIR="$tmp" PATH="$bin:$base" bash -c \
    "set -euo pipefail; root='$root'; build='$root/build/default'; source '$root/scripts/deps.sh'; deps_mpi; echo installed=\$deps_mpi_installed" \
    >"$tmp/out" 2>"$tmp/err"
}
mpi_run || fail "deps_mpi failed: $(cat "$tmp/err")"
expect_contains "$(cat "$tmp/apt.calls" 2>/dev/null)" "install -y -qq libopenmpi-dev openmpi-bin" "apt-get calls"
expect_contains "$(cat "$tmp/out")" "installed=1" "stdout"
rm -f "$tmp/apt.calls"
fake_apt_failing "$bin"
mpi_run || fail "deps_mpi failed with apt-get offline: $(cat "$tmp/err")"
expect_contains "$(cat "$tmp/err")" "ch04's MPI form will not be built" "stderr"
expect_contains "$(cat "$tmp/out")" "installed=0" "stdout"
[ "$failures" = "$before" ] && pass

if [ "$failures" != 0 ]; then
  echo "launcher_test: $failures failure(s)" >&2
  exit 1
fi
echo "launcher_test: all scenarios passed"
