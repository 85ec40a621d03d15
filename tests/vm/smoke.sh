#!/bin/sh
# Runs inside the test VM (/vmtest/smoke.sh): proves the RDMA stack is real
# before any test relies on it. The verbs device must be listed, an RC
# queue pair must ping-pong over it, and librdmacm must connect and do RDMA
# READ/WRITE. Alone, each pair talks to itself over rxe0; on host A of the
# two-VM bed (RDMAMEM_HOST=a) the servers run on host B through its agent
# (tests/peer/vm-agent.c, on PATH) and the clients here, over both device
# pairs: rxe0 to B's rxe0, rxe1 to B's rxe1. Exits non-zero naming the first
# check that failed.
set -eu

# Generous for TCG emulation, yet short of run-vm.sh's whole-run timeout.
limit=120
agent=${RDMAMEM_PEER_AGENT-}

fail() {
	echo "smoke: FAILED: $*"
	exit 1
}

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
# server may not be listening yet. Both must exit 0.
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
	tail -n 2 /tmp/client.log
	echo "smoke: ok: $name"
}

# Usage: device DEV: listed, port active.
device() {
	ibv_devices | grep -qw "$1" || fail "ibv_devices does not list $1"
	ibv_devinfo -d "$1" | grep -q PORT_ACTIVE || fail "$1 port not active"
	echo "smoke: ok: $1 listed, port active"
}

# Usage: pairs DEV SERVER-ADDR ITERATIONS: the two pairs over DEV, the
# servers at SERVER-ADDR. GID index 1 is the IPv4-mapped GID of the
# device's address (0 is the IPv6 link-local).
pairs() {
	pair "ibv_rc_pingpong on $1 to $2 (RC send/recv, $3 iterations)" \
		"ibv_rc_pingpong -d $1 -g 1 -n $3" \
		"ibv_rc_pingpong -d $1 -g 1 -n $3 $2"
	pair "rping on $1 to $2 (rdma_cm, RDMA READ/WRITE, 10 ping-pongs)" \
		"rping -s -a $2 -C 10" \
		"rping -c -a $2 -C 10 -v"
}

if [ -z "$agent" ]; then
	device "${RDMAMEM_RXE_DEV:-rxe0}"
	pairs "${RDMAMEM_RXE_DEV:-rxe0}" "${RDMAMEM_RXE_ADDR:-10.9.0.1}" 500
	exit 0
fi

# Two hosts: a round trip crosses both VMs' network stacks and qemu's
# sockets (tens of ms under TCG), so fewer iterations.
vm-agent --connect "$agent" --wait "$limit" run 30 'ibv_devices' >/tmp/peer-devices.log 2>&1 ||
	{ cat /tmp/peer-devices.log; fail "host B's agent at $agent"; }
set -- "$RDMAMEM_RXE_DEV" "$RDMAMEM_PEER_ADDR" "$RDMAMEM_RXE_DEV1" "$RDMAMEM_PEER_ADDR1"
while [ $# -gt 0 ]; do
	device "$1"
	grep -qw "$1" /tmp/peer-devices.log || fail "host B lists no $1"
	pairs "$1" "$2" 100
	shift 2
done
