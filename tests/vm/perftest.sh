#!/bin/sh
# Runs on host A of the two-VM bed (/vmtest/perftest.sh, make vmbench2): the
# perftest anchor for transfers between the hosts. ib_write_bw, ib_read_bw
# and ib_write_lat, each server on host B (through its agent) and client
# here, over rxe0 to B's rxe0, at each size; prints one line a run:
#
#   perftest: TEST BYTES bytes ITERS iters: bw avg MiB/s | lat avg us (typical)
#
# Soft-RoCE under TCG measures function and relative cost, not speed: the
# figures are what a daemon's transfer between the same VMs and devices is
# held against. Exits non-zero naming the first run that failed.
#
# perftest on rxe: -x 1 is the IPv4-mapped RoCEv2 GID (index 0 is the IPv6
# link-local), -F leaves out the CPU frequency check that a VM cannot pass,
# and the queue pairs are set up over perftest's own TCP exchange (-p).
set -eu

limit=300
agent=${RDMAMEM_PEER_AGENT:?only on host A of the two-VM bed}
dev=${RDMAMEM_RXE_DEV:?} peer=${RDMAMEM_PEER_ADDR:?}
sizes=${PERFTEST_SIZES:-4096 65536 1048576 16777216}

fail() {
	echo "perftest: FAILED: $*"
	exit 1
}

. /vmtest/pair.sh

# Iterations for a size: about 64 MiB moved per bandwidth run, at least 5
# (perftest's minimum) and at most 1000; the latency runs a tenth of that.
iters() {
	n=$((67108864 / $1))
	[ "$n" -le 1000 ] || n=1000
	[ "$2" = bw ] || n=$((n / 10))
	[ "$n" -ge 5 ] || n=5
	echo "$n"
}

# rxe's counter NAME on this host's device (0 where there is none): each
# line says how often the requester's completer retried (a response lost
# or out of order, resent after the queue pair's ack timeout).
counter() {
	cat "/sys/class/infiniband/$dev/ports/1/hw_counters/$1" 2>/dev/null || echo 0
}

for test in ib_write_bw ib_read_bw ib_write_lat; do
	kind=${test##*_}
	for size in $sizes; do
		n=$(iters "$size" "$kind")
		args="-d $dev -x 1 -F -s $size -n $n"
		t0=$(cut -d' ' -f1 /proc/uptime)
		r0=$(counter completer_retry_err)
		pair "$test $size" "$test $args" "$test $args $peer"
		r1=$(counter completer_retry_err)
		t1=$(cut -d' ' -f1 /proc/uptime)
		# The result row starts with the size: bw has #bytes, #iterations,
		# BW peak, BW average, MsgRate; lat has #bytes, #iterations,
		# t_min, t_max, t_typical, t_avg, ...
		row=$(awk -v s="$size" '$1 == s' /tmp/client.log | tail -n 1)
		[ -n "$row" ] || { cat /tmp/client.log; fail "no result row in $test's output"; }
		# shellcheck disable=SC2086
		set -- $row
		if [ "$kind" = bw ]; then
			figure="bw avg $4 MiB/s"
		else
			figure="lat avg $6 us (typical $5)"
		fi
		echo "perftest: $test $size bytes $n iters: $figure [$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, $((r1 - r0)) completer retries]"
	done
done
