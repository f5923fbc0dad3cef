#!/usr/bin/env bash
# test.sh: installs what is missing, builds with warnings as errors, and runs
# every test (unit, integration against the real daemon, the PostgreSQL
# backend against a throwaway server, power cuts on a FUSE file system,
# browser).
# Usage: contrib/test.sh [BUILD_DIR] [extra meson setup options...]
set -euo pipefail
cd "$(dirname "$0")/.."

build="${1:-build}"
shift || true
contrib/install-deps.sh --browser
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" --werror "$@"
fi
meson compile -C "$build"
# PostgreSQL was installed above: a suite postgresql that cannot find it
# fails instead of skipping.
export IDEMHOOK_TEST_REQUIRE_PG=1
# libfuse3 too: as root with /dev/fuse the suite powerloss runs, and fails
# instead of skipping.
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
	export IDEMHOOK_TEST_REQUIRE_FUSE=1
fi
meson test -C "$build" --print-errorlogs --num-processes 2
