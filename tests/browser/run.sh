#!/usr/bin/env bash
# run.sh: the checkout page in a real browser. Headless Chromium (Debian's
# /usr/bin/chromium) driven by playwright-core from npm, installed here on
# first use. Starts the real daemon from $IDEMHOOK_BIN with a temporary
# config; screenshots go to tests/browser/artifacts/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ -z "${IDEMHOOK_BIN:-}" ] || [ ! -x "${IDEMHOOK_BIN}" ]; then
	echo "run.sh: IDEMHOOK_BIN must name the idemhook executable (meson test sets it)" >&2
	exit 1
fi

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
if [ "${#need_apt[@]}" -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "run.sh: missing ${need_apt[*]}; install them (apt-get install -y ${need_apt[*]}) or run as root" >&2
		exit 77
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y "${need_apt[@]}"
fi

if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
	(cd "$here" && npm install --no-audit --no-fund --loglevel=error)
fi

mkdir -p "$here/artifacts"
exec node "$here/checkout.mjs"
