#!/usr/bin/env bash
# demo.sh: installs what is missing, builds, and starts the daemon on the
# built-in demo configuration (127.0.0.1:8080, ./var/idemhook.db).
set -euo pipefail
cd "$(dirname "$0")/.."

contrib/install-deps.sh
if [ ! -f build/build.ninja ]; then
	meson setup build
fi
meson compile -C build >/dev/null
exec build/receiver/cli/idemhook serve
