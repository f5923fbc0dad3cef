#!/bin/sh
# check-rules.sh: promtool checks the alerting rules and runs their unit
# tests. Skips (exit 77) without promtool (Debian: the prometheus package).
# Usage: check-rules.sh RULES TESTS
set -eu
if ! command -v promtool >/dev/null 2>&1; then
	echo "promtool not found: skipped"
	exit 77
fi
promtool check rules "$1"
promtool test rules "$2"
