# cudabench's dependency check, sourced by ./bench (`./bench deps` runs it alone).
#
# It checks what the build really needs, whatever installed it (Debian packages, pip, conda, a
# Kitware tarball): cmake >= 3.25 and ninja on PATH, a C++ compiler, the libraries that
# cmake/Dependencies.cmake requires as find_package() sees them (cmake/probe-deps, a tiny CMake
# project configured in a temporary folder; skipped once build/<preset> has configured), and
# nvcc. What is missing is installed with apt-get when this runs as root on Debian/Ubuntu;
# otherwise, or when apt-get fails (no network), one line names what is missing and how to get
# it. nvcc is never installed from here.
#
# Needs: root (the repository), build (build/<preset>). Tests: tests/launcher/launcher_test.sh.

deps_cmake_min=3.25
deps_what=()     # what is missing, as the message names it
deps_pkg=()      # the Debian package that provides it, same index
deps_found=()    # what was found, for `./bench deps`
deps_unchecked=""  # why the libraries could not be probed, if they could not
deps_apt_state=""  # "", or "failed" / "ineffective" after an apt-get attempt
deps_apt_updated=0

deps_missing() { deps_what+=("$1"); deps_pkg+=("$2"); }

# The first dotted version number in $1.
deps_version_of() { if [[ "$1" =~ ([0-9]+(\.[0-9]+)+) ]]; then echo "${BASH_REMATCH[1]}"; fi; }

# Whether dotted version $1 >= $2.
deps_version_ge() {
  local IFS=. i
  local -a a b
  read -ra a <<<"$1"
  read -ra b <<<"$2"
  for i in 0 1 2; do
    ((10#${a[i]:-0} > 10#${b[i]:-0})) && return 0
    ((10#${a[i]:-0} < 10#${b[i]:-0})) && return 1
  done
  return 0
}

# The C++ compiler CMake would pick: $CXX, else c++, g++ or clang++ on PATH.
deps_cxx() {
  if [ -n "${CXX:-}" ]; then
    command -v "${CXX%% *}"
  else
    command -v c++ || command -v g++ || command -v clang++
  fi
}

deps_check_tools() {
  local v cxx
  if ! command -v cmake >/dev/null; then
    deps_missing "cmake >= $deps_cmake_min" cmake
  else
    v="$(deps_version_of "$(cmake --version 2>/dev/null | head -1)")"
    if [ -z "$v" ] || ! deps_version_ge "$v" "$deps_cmake_min"; then
      deps_missing "cmake >= $deps_cmake_min (found ${v:-an unreadable version} at $(command -v cmake))" cmake
    else
      deps_found+=("cmake $v")
    fi
  fi
  if command -v ninja >/dev/null && v="$(ninja --version 2>/dev/null)"; then
    deps_found+=("ninja $v")
  else
    deps_missing ninja ninja-build
  fi
  if cxx="$(deps_cxx)"; then
    deps_found+=("C++ compiler $cxx")
  else
    deps_missing "a C++ compiler${CXX:+ (CXX=$CXX)}" g++
  fi
}

# The libraries, as find_package() sees them. $1 = 1 probes even where build/<preset> configured.
deps_check_libraries() {
  local force="${1:-0}" generator="" dir status package version debian found
  if [ "$force" != 1 ] && [ -f "$build/build.ninja" ]; then
    deps_found+=("libraries (build/$(basename "$build") configured)")
    return 0
  fi
  command -v ninja >/dev/null && generator=Ninja
  [ -z "$generator" ] && command -v make >/dev/null && generator="Unix Makefiles"
  if ! command -v cmake >/dev/null || [ -z "$generator" ] || ! deps_cxx >/dev/null; then
    deps_unchecked="the libraries are checked once cmake, ninja and a C++ compiler run"
    # Until then, Debian's package database is a hint (it cannot see pip or conda installs).
    if command -v dpkg-query >/dev/null; then
      deps_unchecked=""
      while read -r package version debian; do
        dpkg-query -W -f='${Status}' "$debian" 2>/dev/null | grep -q "install ok installed" \
          || deps_missing "$package >= $version" "$debian"
      done < <(deps_requirements)
    fi
    return 0
  fi
  mkdir -p "$root/build"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/cudabench-deps.XXXXXX")"
  if ! cmake -S "$root/cmake/probe-deps" -B "$dir" -G "$generator" >"$root/build/deps-probe.log" 2>&1 \
    || [ ! -f "$dir/deps.txt" ]; then
    rm -rf "$dir"
    tail -15 "$root/build/deps-probe.log" >&2
    deps_unchecked="a test CMake project failed to configure, so the libraries could not be checked (log: build/deps-probe.log)"
    deps_missing "a working cmake and C++ compiler" ""
    return 0
  fi
  while read -r status package version debian found; do
    if [ "$status" = found ]; then
      deps_found+=("$package $found")
    else
      deps_missing "$package >= $version" "$debian"
    fi
  done <"$dir/deps.txt"
  rm -rf "$dir"
}

# "package version debian-package" for each bench_require() in cmake/Dependencies.cmake.
deps_requirements() {
  sed -n 's/^[[:space:]]*bench_require(\([A-Za-z0-9_]*\)[[:space:]]\{1,\}\([0-9.]*\)[[:space:]]\{1,\}\([A-Za-z0-9.+-]*\)).*/\1 \2 \3/p' \
    "$root/cmake/Dependencies.cmake"
}

deps_collect() {
  deps_what=() deps_pkg=() deps_found=() deps_unchecked=""
  deps_check_tools
  deps_check_libraries "${1:-0}"
}

deps_can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

deps_apt_install() {
  local log="$root/build/deps-apt.log"
  mkdir -p "$root/build"
  echo "bench: installing $* (apt-get; log: build/deps-apt.log)" >&2
  if [ "$deps_apt_updated" = 0 ]; then
    apt-get update -qq >"$log" 2>&1 || return 1
    deps_apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$log" 2>&1
}

# Optional, for the `browser` tests only (the HTML report in headless Chromium): installed with
# apt-get where it can be, else the test reports itself skipped. Never fails the command.
deps_browser() {
  command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null ||
    [ -x /usr/lib/chromium/chromium-headless-shell ] && return 0
  deps_can_apt || return 0
  deps_apt_install chromium-headless-shell ||
    echo "bench: could not install chromium-headless-shell: the browser test will be skipped" >&2
  return 0
}

# Optional, for ch04's multi-process form (ch04_mpi, built when CMake's find_package(MPI) sees
# it) and its CPU tests under mpirun: Open MPI from the distribution (libopenmpi-dev: headers and
# the mpicxx wrapper CMake asks; openmpi-bin: mpirun), installed with apt-get where it can be. Run
# it before the build is configured, which is when CMake looks; deps_mpi_installed=1 says it
# installed something. Without it ch04_mpi is not built (chapters/ch04/MPI_NOT_BUILT says why)
# and its tests do not exist. Never fails the command.
deps_mpi_installed=0
deps_mpi() {
  command -v mpicxx >/dev/null && command -v mpirun >/dev/null && return 0
  deps_can_apt || return 0
  if deps_apt_install libopenmpi-dev openmpi-bin; then
    deps_mpi_installed=1
  else
    echo "bench: could not install libopenmpi-dev openmpi-bin: ch04's MPI form will not be built" >&2
  fi
  return 0
}

# One line: what is missing and how to get it.
deps_report() {
  local what pkgs="" p how
  what="$(printf '%s, ' "${deps_what[@]}")"
  what="${what%, }"
  for p in "${deps_pkg[@]}"; do [ -n "$p" ] && [[ " $pkgs " != *" $p "* ]] && pkgs+="${pkgs:+ }$p"; done
  if [ -z "$pkgs" ]; then
    how="fix it and rerun"
  elif ! command -v apt-get >/dev/null; then
    how="this machine has no apt-get: install with its package manager (Debian/Ubuntu names: $pkgs)"
  elif [ "$deps_apt_state" = failed ]; then
    how="apt-get failed (no network? log: build/deps-apt.log); install with: apt-get install -y $pkgs"
  elif [ "$deps_apt_state" = ineffective ]; then
    how="apt-get installed $pkgs, which was not enough (too old a version?)"
  elif [ "$(id -u)" = 0 ]; then
    how="install with: apt-get install -y $pkgs"
  else
    how="install with: sudo apt-get install -y $pkgs"
  fi
  [[ " $pkgs " == *" cmake "* || " $pkgs " == *" ninja-build "* ]] && how+="; cmake and ninja can also come from pip: pip install cmake ninja"
  [ -n "$deps_unchecked" ] && how+="; $deps_unchecked"
  echo "bench: missing $what; $how" >&2
}

# nvcc on PATH, or the toolkit's usual place put on PATH.
deps_find_nvcc() {
  command -v nvcc >/dev/null && return 0
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH" && return 0
  echo "bench: nvcc not found: install the CUDA toolkit (12.4 or newer) or put its bin/ on PATH" >&2
  return 1
}

# Checks, installs what it can, checks again; returns 1 after printing the one line.
# $1 = 1 probes the libraries even where build/<preset> has configured (`./bench deps`).
deps_ensure() {
  local force="${1:-0}" tried=" " todo p
  while true; do
    deps_collect "$force"
    [ ${#deps_what[@]} -eq 0 ] && break
    todo=()
    for p in "${deps_pkg[@]}"; do [ -n "$p" ] && [[ "$tried" != *" $p "* ]] && todo+=("$p"); done
    if [ ${#todo[@]} -eq 0 ]; then
      [ "$tried" != " " ] && deps_apt_state=ineffective
      deps_report
      return 1
    fi
    if ! deps_can_apt; then
      deps_report
      return 1
    fi
    if ! deps_apt_install "${todo[@]}"; then
      deps_apt_state=failed
      deps_report
      return 1
    fi
    tried+="${todo[*]} "
  done
  deps_find_nvcc || return 1
  deps_found+=("nvcc $(deps_version_of "$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || true)")")
  return 0
}
