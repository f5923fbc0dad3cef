#!/bin/sh
# check-rules.sh: promtool checks the alerting rules and runs their unit
# tests, after checking that the tests cover every alert: each one is
# expected to fire in at least one case and to stay quiet in another, so
# an alert nobody tested (or one that could never fire) fails here.
# Skips (exit 77) without promtool (Debian: the prometheus package).
# Usage: check-rules.sh RULES TESTS
set -eu
if ! command -v promtool >/dev/null 2>&1; then
	echo "promtool not found: skipped"
	exit 77
fi
# One line per alert with how many cases expect it to fire and to be quiet.
# A case is "alertname: X" followed by "exp_alerts: []" (quiet) or by
# "exp_alerts:" and a list (fires).
awk '
FNR == 1 { file++ }
file == 1 && $1 == "-" && $2 == "alert:" { alerts[$3] = 1; order[++n] = $3 }
file == 2 && $1 == "alertname:" { name = $2 }
file == 2 && $1 == "exp_alerts:" && name != "" {
	if ($2 == "[]") { quiet[name]++ } else { fires[name]++ }
	name = ""
}
END {
	bad = 0
	for (i = 1; i <= n; i++) {
		a = order[i]
		if (!(a in fires)) {
			printf "%s: no test case where it fires\n", a; bad = 1
		}
		if (!(a in quiet)) {
			printf "%s: no test case where it stays quiet\n", a; bad = 1
		}
	}
	for (a in fires) { if (!(a in alerts)) { printf "%s: tested, but no such alert\n", a; bad = 1 } }
	for (a in quiet) { if (!(a in alerts)) { printf "%s: tested, but no such alert\n", a; bad = 1 } }
	exit bad
}' "$1" "$2"
promtool check rules "$1"
promtool test rules "$2"
