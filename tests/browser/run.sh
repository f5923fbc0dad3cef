#!/usr/bin/env bash
# run.sh: the checkout page and the operator console in a real browser
# (checkout.py, console.py): headless Chromium driven by
# Selenium, all three from Debian (chromium, chromium-driver,
# python3-selenium; contrib/install-deps.sh installs them). Nothing is
# downloaded. Starts the real daemon from $IDEMHOOK_BIN with a temporary
# config; screenshots go to tests/browser/artifacts/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ -z "${IDEMHOOK_BIN:-}" ] || [ ! -x "${IDEMHOOK_BIN}" ]; then
	echo "run.sh: IDEMHOOK_BIN must name the idemhook executable (meson test sets it)" >&2
	exit 1
fi
# Debian's own Python: python3-selenium is installed for it, not for another
# python3 that may come first on PATH.
python=/usr/bin/python3
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
{ [ -x "$python" ] && "$python" -c 'import selenium' 2>/dev/null; } || missing+=(python3-selenium)
if [ "${#missing[@]}" -gt 0 ]; then
	echo "run.sh: missing ${missing[*]}: run contrib/install-deps.sh (apt-get install ${missing[*]})" >&2
	exit 1
fi
rc=0
"$python" "$here/checkout.py" || rc=1
"$python" "$here/console.py" || rc=1
exit "$rc"
