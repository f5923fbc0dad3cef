#!/bin/sh
# check-unit.sh: checks contrib/idemhook.service with systemd-analyze: verify
# clean, and a sandbox exposure of 2.0 or lower. Skips (exit 77) without the
# tool. Usage: check-unit.sh UNIT [IDEMHOOK_BINARY]
set -eu
unit=$1
bin=${2:-}
if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "systemd-analyze not found: skipped"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# verify checks that ExecStart exists: point it at the binary just built.
if [ -n "$bin" ]; then
	sed "s#^ExecStart=/usr/bin/idemhook #ExecStart=$bin #" "$unit" >"$tmp/idemhook.service"
else
	cp "$unit" "$tmp/idemhook.service"
fi
systemd-analyze verify --man=no "$tmp/idemhook.service"
# The threshold is on the 0..100 scale that is shown divided by ten.
systemd-analyze security --offline=yes --threshold=20 "$tmp/idemhook.service" | tail -n 1
