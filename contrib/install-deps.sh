#!/usr/bin/env bash
# install-deps.sh: installs the Debian packages idemhook needs to build and
# test, only those that are missing. Uses sudo when not run as root.
set -euo pipefail

packages=(
	build-essential meson ninja-build pkg-config python3 ca-certificates
	libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev libcjson-dev
	libssl-dev libinih-dev libcmocka-dev libsystemd-dev
	sqlite3 curl openssl scdoc valgrind
	prometheus
)
missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
# The browser tests need a Chromium and Node.js with npm. They are checked as
# commands: a machine may have Node.js from elsewhere, and Debian's npm
# package would conflict with it.
if [ "${1:-}" = "--browser" ]; then
	[ -x /usr/bin/chromium ] || missing+=(chromium)
	command -v node >/dev/null 2>&1 || missing+=(nodejs)
	command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
# The prometheus package is here for its promtool (the checks of contrib/
# prometheus). Its own server would start at once and at every boot on port
# 9090, the admin listener's default: a policy-rc.d keeps the install from
# starting any service, and the unit is disabled after.
policy=""
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ ! -e /usr/sbin/policy-rc.d ]; then
	policy=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod 0755 "$policy"
fi
status=0
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
	status=$?
if [ -n "$policy" ]; then
	$sudo rm -f "$policy"
fi
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
	$sudo systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
exit "$status"
