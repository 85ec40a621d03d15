#!/bin/sh
# Runs on host A of the two-VM bed (/vmtest/transferbench.sh, make
# vmbench2), after perftest.sh: the daemon's Transfer between the same two
# hosts and devices (rxe0 to B's rxe0), beside perftest's figures. Host B's
# region-owner exports a region registered on its rxe0 only (one device
# pair, as perftest); bench-transfer, a client of A's rdmamemd, moves bytes
# to and from it at each size and prints its lines; then one line a size
# and test puts the two side by side:
#
#   vs perftest: WRITE|READ BYTES bytes: transfer X MiB/s, ib_*_bw Y MiB/s, ratio X/Y
#   vs perftest: lat BYTES bytes: transfer X us, 2 x ib_write_lat Y us, ratio X/Y
#
#   transferbench.sh PERFTEST_OUTPUT
#
# Exits non-zero naming the first step that failed.
set -eu

agent=${RDMAMEM_PEER_AGENT:?only on host A of the two-VM bed}
sizes=${PERFTEST_SIZES:-4096 65536 1048576 16777216}
perf=${1:?usage: transferbench.sh PERFTEST_OUTPUT}
max=0
for s in $sizes; do [ "$s" -le "$max" ] || max=$s; done

fail() {
	echo "transferbench: FAILED: $*"
	exit 1
}

line=$(vm-agent --connect "$agent" spawn 60 \
	"exec region-owner --socket \"\$RDMAMEM_HOST_SOCKET\" --device rxe0 --size $max --fill transferbench --export" 2>/dev/null) ||
	fail "region-owner on B: $line"
desc=${line##* descriptor=}
case $desc in
rdmamem1.*) ;;
*) fail "no descriptor from region-owner on B: $line" ;;
esac

# shellcheck disable=SC2086
bench-transfer --socket "$RDMAMEM_HOST_SOCKET" --device rxe0 --descriptor "$desc" $sizes |
	tee /tmp/transferbench.out || fail "bench-transfer"

awk '
FNR == NR && $1 == "perftest:" {
	if ($2 == "ib_write_lat")
		pf["lat " $3] = 2 * $9
	else
		pf[($2 == "ib_write_bw" ? "WRITE" : "READ") " " $3] = $9
	next
}
$1 == "transfer:" {
	key = $2 " " $3
	if (!(key in pf) || pf[key] == 0)
		next
	if ($2 == "lat")
		printf "vs perftest: lat %s bytes: transfer %s us, 2 x ib_write_lat %.2f us, ratio %.2f\n", $3, $9, pf[key], $9 / pf[key]
	else
		printf "vs perftest: %s %s bytes: transfer %s MiB/s, ib_%s_bw %s MiB/s, ratio %.2f\n", $2, $3, $9, ($2 == "WRITE" ? "write" : "read"), pf[key], $9 / pf[key]
}' "$perf" /tmp/transferbench.out
