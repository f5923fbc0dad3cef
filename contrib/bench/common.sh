# common.sh: shared by the bench scripts (sourced from the repository root).
# bench_binary sets $bin: $IDEMHOOK_BIN if given, else a release build in
# build-bench. start_daemon NAME runs "$work/NAME.ini" (which must write its
# port to "$work/NAME.port") and waits for it; stop_daemon sends SIGTERM.

bench_binary() {
	if [ -z "${IDEMHOOK_BIN:-}" ]; then
		contrib/install-deps.sh
		if [ ! -f build-bench/build.ninja ]; then
			meson setup build-bench --buildtype=release >/dev/null
		fi
		meson compile -C build-bench receiver/cli/idemhook >/dev/null
		IDEMHOOK_BIN="$PWD/build-bench/receiver/cli/idemhook"
	fi
	bin="$IDEMHOOK_BIN"
}

start_daemon() { # NAME
	rm -f "$work/$1.port"
	"$bin" -q -c "$work/$1.ini" serve 2>"$work/$1.log" &
	pid=$!
	for _ in $(seq 1 600); do
		if [ -s "$work/$1.port" ]; then
			return 0
		fi
		sleep 0.05
	done
	echo "daemon $1 did not start; see its log:" >&2
	cat "$work/$1.log" >&2
	exit 1
}

stop_daemon() {
	kill -TERM "$pid"
	wait "$pid" || true
	pid=""
}
