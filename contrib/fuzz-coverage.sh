#!/usr/bin/env bash
# fuzz-coverage.sh [CORPORA]: the line coverage the fuzz corpora reach, per
# source file. Builds build-fuzzcov (clang with LLVM source-based coverage,
# no sanitizers), runs every harness once over its seeds (tests/fuzz/corpus)
# and what fuzzing kept under CORPORA/NAME (default
# build-fuzz/tests/fuzz/corpus), and prints `llvm-cov report` for the code
# behind the outside inputs. Needs clang and llvm (llvm-profdata, llvm-cov).
set -euo pipefail
cd "$(dirname "$0")/.."
corpora=${1:-build-fuzz/tests/fuzz/corpus}
build=build-fuzzcov
if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" -Dfuzz=true -Dtests=false \
		-Dc_args='-fprofile-instr-generate -fcoverage-mapping' \
		-Dc_link_args='-fprofile-instr-generate' >/dev/null
fi
rm -rf "$build/profiles"
mkdir -p "$build/profiles"
# Anything instrumented that runs keeps its profile out of the source tree.
export LLVM_PROFILE_FILE="$PWD/$build/profiles/other-%p.profraw"
meson compile -C "$build" >/dev/null
objects=()
profiles=()
for exe in "$build"/tests/fuzz/fuzz_*; do
	[ -x "$exe" ] && [ -f "$exe" ] || continue
	name=${exe##*/fuzz_}
	dirs=(tests/fuzz/corpus/"$name")
	[ -d "$corpora/$name" ] && dirs+=("$corpora/$name")
	LLVM_PROFILE_FILE="$build/profiles/$name.profraw" "$exe" -runs=0 "${dirs[@]}" \
		>/dev/null 2>&1
	objects+=(-object "$exe")
	profiles+=("$build/profiles/$name.profraw")
done
llvm-profdata merge -sparse "${profiles[@]}" -o "$build/profiles/all.profdata"
# The code behind the outside inputs; llvm-cov 14 reports every file, so
# the rows are picked here (paths as the compiler saw them, from the build
# directory).
cd "$build"
objects=("${objects[@]//$build\//}")
llvm-cov report -instr-profile profiles/all.profdata "${objects[@]:1}" |
	grep -E '^(Filename|-{10}|\.\./providers/[a-z_]+\.c|\.\./(receiver/common/(json|config|text|money)|receiver/engine/capture|handlers/api)\.c) '
