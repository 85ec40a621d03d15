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

. /vmtest/pair.sh

# pair, then the client's last two lines (the round trip) and "ok".
ok_pair() {
	pair "$@"
	tail -n 2 /tmp/client.log
	echo "smoke: ok: $1"
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
	ok_pair "ibv_rc_pingpong on $1 to $2 (RC send/recv, $3 iterations)" \
		"ibv_rc_pingpong -d $1 -g 1 -n $3" \
		"ibv_rc_pingpong -d $1 -g 1 -n $3 $2"
	ok_pair "rping on $1 to $2 (rdma_cm, RDMA READ/WRITE, 10 ping-pongs)" \
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
