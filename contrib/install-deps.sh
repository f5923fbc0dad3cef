#!/usr/bin/env bash
# install-deps.sh: installs the Debian packages idemhook needs to build and
# test, only those that are missing, as root or through sudo. Without either
# it prints the one apt-get command to run and exits 1.
# Usage: install-deps.sh [--browser]   (--browser: also what the browser tests use)
set -euo pipefail

packages=(
	build-essential meson ninja-build pkg-config python3 ca-certificates
	libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev libcjson-dev
	libssl-dev libinih-dev libcmocka-dev libsystemd-dev libpq-dev
	sqlite3 curl openssl scdoc valgrind
	prometheus
	postgresql
	clang libclang-rt-14-dev
	libfuse3-dev fuse3 # plfs, the FUSE file system of the suite powerloss
)
# The browser tests: Debian's Chromium, its driver and Selenium, nothing
# from another registry.
browser_packages=(chromium chromium-driver python3-selenium)
if [ "${1:-}" = "--browser" ]; then
	packages+=("${browser_packages[@]}")
fi
missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-deps.sh: missing packages; as root, run: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
		exit 1
	fi
	sudo="sudo"
fi
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
# The prometheus package is here for its promtool (the checks of contrib/
# prometheus); postgresql for the binaries the suite postgresql runs in a
# throwaway directory of its own (tests/harness/pgserver.c). Their own
# servers would start at once and at every boot (prometheus on port 9090, the
# admin listener's default; PostgreSQL's "main" cluster on 5432): a
# policy-rc.d keeps the install from starting any service, and the units are
# disabled after.
services=()
for p in prometheus postgresql; do
	if [[ " ${missing[*]} " == *" $p "* ]]; then
		services+=("$p")
	fi
done
policy=""
if [ "${#services[@]}" -gt 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
	policy=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod 0755 "$policy"
fi
status=0
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
	status=$?
if [ -n "$policy" ]; then
	$sudo rm -f "$policy"
fi
if [ "${#services[@]}" -gt 0 ] && [ -d /run/systemd/system ]; then
	for p in "${services[@]}"; do
		$sudo systemctl disable --now "$p.service" >/dev/null 2>&1 || true
	done
fi
exit "$status"
