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
meson compile -C "$build" >/dev/null
rm -rf "$build/profiles"
mkdir -p "$build/profiles"
objects=()
for exe in "$build"/tests/fuzz/fuzz_*; do
	[ -x "$exe" ] && [ -f "$exe" ] || continue
	name=${exe##*/fuzz_}
	dirs=(tests/fuzz/corpus/"$name")
	[ -d "$corpora/$name" ] && dirs+=("$corpora/$name")
	LLVM_PROFILE_FILE="$build/profiles/$name.profraw" "$exe" -runs=0 "${dirs[@]}" \
		>/dev/null 2>&1
	objects+=(-object "$exe")
done
llvm-profdata merge -sparse "$build"/profiles/*.profraw -o "$build/profiles/all.profdata"
llvm-cov report -instr-profile "$build/profiles/all.profdata" "${objects[@]:1}" \
	providers/*.c receiver/json.c receiver/config.c receiver/capture.c receiver/api.c \
	receiver/text.c receiver/money.c
