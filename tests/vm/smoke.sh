#!/bin/sh
# Runs inside the test VM (/vmtest/smoke.sh): proves the RDMA stack is real
# before any test relies on it. The verbs device must be listed, an RC
# queue pair must ping-pong over it, and librdmacm must connect and do RDMA
# READ/WRITE. Exits non-zero naming the first check that failed.
set -eu

dev=${RDMAMEM_RXE_DEV:-rxe0}
addr=${RDMAMEM_RXE_ADDR:-10.9.0.1}
# Generous for TCG emulation, yet short of run-vm.sh's whole-run timeout.
limit=120

fail() {
	echo "smoke: FAILED: $*"
	exit 1
}

# Runs a server in the background and its client against it; the client is
# retried while the server may not be listening yet. Both must exit 0.
# Usage: pair NAME 'SERVER COMMAND' 'CLIENT COMMAND' (split on spaces)
# shellcheck disable=SC2086
pair() {
	name=$1
	timeout "$limit" $2 >/tmp/server.log 2>&1 &
	server=$!
	tries=0
	until timeout "$limit" $3 >/tmp/client.log 2>&1; do
		tries=$((tries + 1))
		if [ "$tries" -ge 10 ] || ! kill -0 "$server" 2>/dev/null; then
			cat /tmp/client.log /tmp/server.log
			kill "$server" 2>/dev/null || true
			fail "$name client"
		fi
		sleep 1
	done
	if ! wait "$server"; then
		cat /tmp/server.log
		fail "$name server"
	fi
	tail -n 2 /tmp/client.log
	echo "smoke: ok: $name"
}

ibv_devices | grep -qw "$dev" || fail "ibv_devices does not list $dev"
ibv_devinfo -d "$dev" | grep -q PORT_ACTIVE || fail "$dev port not active"
echo "smoke: ok: $dev listed, port active"

# GID index 1 is the IPv4-mapped GID of $addr (0 is the IPv6 link-local).
pair "ibv_rc_pingpong (RC send/recv, 500 iterations)" \
	"ibv_rc_pingpong -d $dev -g 1 -n 500" \
	"ibv_rc_pingpong -d $dev -g 1 -n 500 $addr"

pair "rping (rdma_cm, RDMA READ/WRITE, 10 ping-pongs)" \
	"rping -s -a $addr -C 10" \
	"rping -c -a $addr -C 10 -v"
