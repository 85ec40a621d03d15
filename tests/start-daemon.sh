# Sourced by tests/installcheck.sh and tests/deb-check.sh (which define
# fail()): start_daemon WHAT DAEMON SOCKET starts DAEMON with built-in
# defaults on SOCKET, sets pid, and waits up to 5 s for the socket; WHAT
# names the daemon in the failure.
start_daemon() {
	"$2" --config=/dev/null --socket "$3" --log-level warning &
	pid=$!
	i=0
	until [ -S "$3" ]; do
		i=$((i + 1))
		[ $i -lt 500 ] || fail "the $1 daemon did not start"
		sleep 0.01
	done
}
