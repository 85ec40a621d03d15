#!/bin/sh
# Sourced inside the test VMs (/vmtest/pair.sh) by smoke.sh and perftest.sh:
# a server and its client, the server here or, when $agent names host B's
# agent (tests/peer/vm-agent.c, on PATH), on host B. The caller sets agent
# (empty alone) and limit (seconds each side may take), and its own
# fail(), which prints its message and exits non-zero.

: "${limit:?set by the script that sources pair.sh}" "${agent?}"

# The server side of a pair, here or (with an agent) on host B: started in
# the background, asked whether it still runs, waited for (its output in
# /tmp/server.log, its status returned), killed.
# shellcheck disable=SC2086
server_start() {
	if [ -n "$agent" ]; then
		server=$(vm-agent --connect "$agent" --wait "$limit" spawn 0 "timeout $limit $1" \
			2>&1 >/dev/null | sed -n 's/^vm-agent rc=0 pid=\([0-9]*\) .*/\1/p')
		[ -n "$server" ] || fail "could not start '$1' on host B"
	else
		timeout "$limit" $1 >/tmp/server.log 2>&1 &
		server=$!
	fi
}

server_running() {
	if [ -n "$agent" ]; then
		vm-agent --connect "$agent" run 10 "kill -0 $server" >/dev/null 2>&1
	else
		kill -0 "$server" 2>/dev/null
	fi
}

server_wait() {
	if [ -n "$agent" ]; then
		vm-agent --connect "$agent" wait "$limit" "$server" >/tmp/server.log 2>&1
	else
		wait "$server"
	fi
}

server_kill() {
	if [ -n "$agent" ]; then
		vm-agent --connect "$agent" run 10 "kill $server" >/dev/null 2>&1 || true
	else
		kill "$server" 2>/dev/null || true
	fi
}

# Runs a server and its client against it; the client is retried while the
# server may not be listening yet. Both must exit 0; the client's output is
# left in /tmp/client.log.
# Usage: pair NAME 'SERVER COMMAND' 'CLIENT COMMAND' (split on spaces)
# shellcheck disable=SC2086
pair() {
	name=$1
	server_start "$2"
	tries=0
	until timeout "$limit" $3 >/tmp/client.log 2>&1; do
		tries=$((tries + 1))
		if [ "$tries" -ge 10 ] || ! server_running; then
			cat /tmp/client.log
			server_kill
			server_wait || true
			cat /tmp/server.log
			fail "$name client"
		fi
		sleep 1
	done
	if ! server_wait; then
		cat /tmp/server.log
		fail "$name server"
	fi
}
