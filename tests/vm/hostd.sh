#!/bin/sh
# Runs inside the two-VM bed (/vmtest/hostd.sh): this host's own rdmamemd,
# the one its clients and the other host's peers use, on
# $RDMAMEM_HOST_SOCKET (the same path on both hosts), accepting rdmacm
# connections on both of its addresses (port 7471). rdmamemd and rdmamemctl
# come from PATH.
#
#   hostd.sh start   starts it and waits until it answers Ping (when it
#                    runs already: nothing)
#   hostd.sh kill    SIGKILLs it and waits until it is gone (a crash)
#   hostd.sh stop    SIGTERM, and waits for a clean exit
#
# Its log is /tmp/rdmamemd-host.log (appended to across restarts), its pid
# in /run/rdmamemd-host.pid. Exits non-zero naming what failed.
set -eu

sock=${RDMAMEM_HOST_SOCKET:?only in the two-VM bed, whose /init sets it}
log=/tmp/rdmamemd-host.log
pidfile=/run/rdmamemd-host.pid
# Tenths of a second the daemon gets to come up or go away under TCG.
limit=300

fail() {
	echo "hostd: FAILED: $*" >&2
	exit 1
}

# A process that is gone or a zombie (whoever reaps it, it has exited).
gone() {
	[ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

wait_gone() {
	n=0
	until gone "$1"; do
		n=$((n + 1))
		[ "$n" -le "$limit" ] || fail "rdmamemd $1 still there after $((limit / 10)) s"
		sleep 0.1
	done
}

case ${1-} in
start)
	if [ -e "$pidfile" ] && ! gone "$(cat "$pidfile")"; then
		echo "hostd: rdmamemd $(cat "$pidfile") already serving $sock"
		exit 0
	fi
	mkdir -p "${sock%/*}"
	echo "hostd: starting rdmamemd at $(cut -d' ' -f1 /proc/uptime)s" >>"$log"
	# Its own session and no tie to our output: whoever runs this (an agent
	# reading our output to its end) is not held up by the daemon.
	# RDMAMEM_HOSTD_ARGS: more options, for a run that tries settings
	# (make vmbench2 HOSTD_ARGS=...).
	# shellcheck disable=SC2086
	setsid rdmamemd --socket "$sock" --socket-mode 0666 \
		--rdmacm-listen "$RDMAMEM_RXE_ADDR,$RDMAMEM_RXE_ADDR1" ${RDMAMEM_HOSTD_ARGS:-} \
		</dev/null >>"$log" 2>&1 &
	pid=$!
	echo "$pid" >"$pidfile"
	n=0
	until rdmamemctl --socket "$sock" ping >/dev/null 2>&1; do
		n=$((n + 1))
		if gone "$pid" || [ "$n" -gt "$limit" ]; then
			tail -n 20 "$log" >&2
			fail "rdmamemd did not come up on $sock"
		fi
		sleep 0.1
	done
	echo "hostd: rdmamemd $pid serving $sock"
	;;
kill | stop)
	pid=$(cat "$pidfile") || fail "no $pidfile: not started"
	if [ "$1" = kill ]; then
		kill -KILL "$pid" || fail "kill $pid"
	else
		kill -TERM "$pid" || fail "kill $pid"
	fi
	wait_gone "$pid"
	rm -f "$pidfile"
	echo "hostd: rdmamemd $pid gone ($1)"
	;;
*)
	fail "usage: hostd.sh start|kill|stop"
	;;
esac
