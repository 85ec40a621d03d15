#!/bin/bash
# Runs one shell command inside the Soft-RoCE test VM, or on host A of the
# two-VM bed, and exits with its status.
#
#   tests/vm/run-vm.sh --build-dir DIR --cmd 'COMMAND' [--add FILE]...
#                      [--path DIR]... [--timeout SEC]
#                      [--hosts 2 --cmd-b 'COMMAND' | --numa] [--python]
#
# Builds the kernel and initramfs into the build dir (build-initramfs.sh; the
# kernel is cached), boots it under qemu with TCG (a guest hangs under KVM on
# our machines), streams the console to stdout and DIR/console.log, and reads
# the exit status from /init's "VMTEST-RESULT rc=N" line.
#
# --add FILE   copy FILE (and its libraries) into the VM at its absolute path
# --path DIR   put DIR first on the command's PATH (repeatable)
# --timeout    wall-clock limit for the whole boot and run (default 600 s)
# --hosts 2    boot two VMs from the same initramfs, A and B, each with two
#              virtio-net NICs joined to the other VM's by qemu socket
#              netdevs over loopback (tests/vm/README.md has the layout).
#              A runs --cmd, B runs --cmd-b (its agent, which A's /init
#              tells to quit at the end); each prints its own result line,
#              and both must be 0. Consoles: DIR/console-a.log and
#              DIR/console-b.log, streamed with "[A] " and "[B] " in front.
# --python     python3 and pytest in the VM (build-initramfs.sh --python)
# --numa       one VM with two NUMA nodes (a vCPU and half the memory each,
#              at distance 21) and a virtio-net NIC on each node's PCI
#              expander bridge; /init puts rxe0 and rxe1 on them
#              (tests/vm/README.md). Console: DIR/console-numa.log.
#
# The command runs as root under busybox sh, from the caller's directory, with
# the environment /init gives it (alone: RDMAMEM_VM=1, RDMAMEM_RXE_DEV=rxe0
# and RDMAMEM_RXE_ADDR=10.9.0.1). Every way of not getting a result (no
# boot, panic, timeout, no marker) exits non-zero with a message: a VM test
# is never skipped.
set -eu -o pipefail

die() {
	echo "run-vm.sh: FAILED: $*" >&2
	exit 1
}

# Shell-quotes $1 for run.sh.
quote() {
	printf "'%s'" "$(printf %s "$1" | sed "s/'/'\\\\''/g")"
}

now() {
	date +%s.%N
}

here=$(cd "$(dirname "$0")" && pwd)
build='' cmd='' cmd_b='' hosts=1 numa=0 timeout=600 python=()
adds=() paths=()
while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) build=${2:?--build-dir needs a directory} ;;
	--cmd) cmd=${2:?--cmd needs a command} ;;
	--add) adds+=("${2:?--add needs a file}") ;;
	--path) paths+=("${2:?--path needs a directory}") ;;
	--timeout) timeout=${2:?--timeout needs seconds} ;;
	--hosts) hosts=${2:?--hosts needs 1 or 2} ;;
	--cmd-b) cmd_b=${2:?--cmd-b needs a command} ;;
	--numa)
		numa=1
		shift
		continue
		;;
	--python)
		python=(--python)
		shift
		continue
		;;
	*) die "unknown argument '$1' (see the usage at the top of $0)" ;;
	esac
	shift 2
done
[ -n "$build" ] && [ -n "$cmd" ] || die "usage: $0 --build-dir DIR --cmd COMMAND [--add FILE]... [--path DIR]... [--timeout SEC] [--hosts 2 --cmd-b COMMAND]"
[ "$numa" = 0 ] || [ "$hosts" = 1 ] || die "--numa is one VM: not with --hosts 2"
case $hosts in
1) [ -z "$cmd_b" ] || die "--cmd-b is for --hosts 2" ;;
2) [ -n "$cmd_b" ] || die "--hosts 2 needs --cmd-b (what host B runs)" ;;
*) die "--hosts is 1 or 2, not '$hosts'" ;;
esac
command -v qemu-system-x86_64 >/dev/null ||
	die "qemu-system-x86_64 not found: install qemu-system-x86 (make deps does)"

t0=$(now)
mkdir -p "$build"
overlay=$build/overlay
rm -rf "$overlay"
mkdir -p "$overlay/vmtest"
# The script /init runs: PATH, the caller's directory, the command.
write_run() {
	echo "# Written by run-vm.sh"
	for p in "${paths[@]}"; do
		echo "PATH=$(quote "$p"):\$PATH"
	done
	echo "mkdir -p $(quote "$PWD") && cd $(quote "$PWD") || exit 125"
	printf '%s\n' "$1"
}
write_run "$cmd" >"$overlay/vmtest/run.sh"
[ "$hosts" = 1 ] || write_run "$cmd_b" >"$overlay/vmtest/run-b.sh"
"$here/build-initramfs.sh" --overlay "$overlay" "${python[@]}" "$build" "${adds[@]}" ||
	die "could not build the VM (see above)"
t1=$(now)

# Boots one VM: boot_vm LOG PREFIX APPEND [QEMU ARGUMENT...]. The console
# goes to LOG and to stdout with PREFIX in front of each line; qemu's exit
# status to LOG.rc. stdin from /dev/null: qemu leaves the terminal alone and
# never waits on it. sed drops the serial line's CRs and the BIOS's escape
# sequences, which would reset the caller's terminal and wipe the host test
# output above.
boot_vm() {
	local log=$1 prefix=$2 append=$3
	shift 3
	set +e
	timeout -k 10 "$timeout" qemu-system-x86_64 -accel tcg -m 1024 -smp "$smp" \
		-nographic -no-reboot "$@" \
		-kernel "$build/vmlinuz" -initrd "$build/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet panic=-1$append" </dev/null 2>&1 |
		sed -u -e 's/\r$//' -e 's/\x1b[^a-zA-Z]*[a-zA-Z]//g' | tee "$log" |
		sed -u -e '/^vmtest-heartbeat: /d' -e "s/^/$prefix/"
	echo "${PIPESTATUS[0]}" >"$log.rc"
	set -e
}

# Sets result to the command's exit status in a VM's console LOG, or dies
# saying why there is none: vm_result NAME LOG (NAME '' alone, else "host A"
# or "host B").
vm_result() {
	local name=$1 log=$2 qemu_rc init_at reason who=${1:+$1: }

	qemu_rc=$(cat "$log.rc")
	init_at=$(sed -n 's/^.*vmtest: init started at \(.*\)s$/\1/p' "$log")
	[ -z "$init_at" ] || timing="$timing, ${name:-guest} reached /init at ${init_at}s uptime"
	result=$(sed -n 's/^VMTEST-RESULT rc=\([0-9]*\)$/\1/p' "$log" | tail -n 1)
	if [ -z "$result" ]; then
		[ "$qemu_rc" -ne 124 ] && [ "$qemu_rc" -ne 137 ] ||
			die "${who}the VM did not finish within ${timeout}s ($timing); console: $log"
		reason=$(sed -n 's/^VMTEST-SETUP-FAILED: //p' "$log")
		[ -z "$reason" ] || die "${who}VM setup failed: $reason ($timing); console: $log"
		[ -n "$init_at" ] || die "${who}the VM never reached /init (qemu exit $qemu_rc, $timing); console: $log"
		die "${who}the VM stopped without a result line (qemu exit $qemu_rc, $timing); console: $log"
	fi
	[ "$qemu_rc" -eq 0 ] || die "${who}qemu exited $qemu_rc after the command finished with $result"
}

# Two loopback ports nobody listens on, from the kernel.
free_ports() {
	python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))'
}

# The qemu arguments of host H's two NICs (H: 1 for A, 2 for B): NIC i on
# a socket netdev that listens (A) or connects (B) on loopback port i, with
# the MAC /init looks for. Words without spaces, one a line.
nics() {
	local i ports=("$port0" "$port1")

	for i in 0 1; do
		printf '%s\n' -netdev "socket,id=n$i,$2=127.0.0.1:${ports[i]}" \
			-device "virtio-net-pci,netdev=n$i,mac=52:54:00:09:0$((5 + i)):0$1"
	done
}

listening() {
	[ -n "$(ss -Hltn "sport = :$1")" ]
}

# The NUMA VM's machine: q35 (PCIe), nodes 0 and 1 with a vCPU and 512 MiB
# each and the SLIT distance of two sockets, and per node i a PCI expander
# bridge (pxb-pcie, bus 64 * (i + 1)) that says it is on node i, a root port
# under it and a virtio-net NIC on that with the MAC /init looks for
# (52:54:00:09:0N:01 for network 10.9.N.0/24). The main bus is not used:
# qemu gives it no proximity domain, so its functions' numa_node is -1. The
# NICs need no netdev (each rxe device talks to itself); no option ROM, no
# default NIC.
numa_machine() {
	local i

	printf '%s\n' -M q35 -nic none
	for i in 0 1; do
		printf '%s\n' -object "memory-backend-ram,id=m$i,size=512M" \
			-numa "node,nodeid=$i,memdev=m$i,cpus=$i" \
			-device "pxb-pcie,id=pxb$i,bus_nr=$((64 * (i + 1))),numa_node=$i,bus=pcie.0" \
			-device "pcie-root-port,id=rp$i,bus=pxb$i,chassis=$((i + 1))" \
			-device "virtio-net-pci,bus=rp$i,mac=52:54:00:09:0$((7 + i)):01,romfile="
	done
	# After the nodes it names.
	printf '%s\n' -numa dist,src=0,dst=1,val=21
}

if [ "$hosts" = 1 ]; then
	log=$build/console.log
	smp=2
	if [ "$numa" = 1 ]; then
		log=$build/console-numa.log
		echo "run-vm.sh: booting $(cat "$build/kernel/package") under qemu (TCG) with two NUMA nodes, timeout ${timeout}s, console in $log"
		# shellcheck disable=SC2046
		boot_vm "$log" '' ' rdmamem.host=numa' $(numa_machine)
	else
		echo "run-vm.sh: booting $(cat "$build/kernel/package") under qemu (TCG), timeout ${timeout}s, console in $log"
		# No NIC: the VM's network is a veth pair inside it.
		boot_vm "$log" '' '' -nic none
	fi
	t2=$(now)
	timing=$(awk -v a="$t0" -v b="$t1" -v c="$t2" \
		'BEGIN { printf "initramfs %.1fs, VM %.1fs, total %.1fs", b - a, c - b, c - a }')
	vm_result '' "$log"
	if [ "$result" -ne 0 ]; then
		echo "run-vm.sh: FAILED: the command exited $result in the VM ($timing)" >&2
		exit "$result"
	fi
	echo "run-vm.sh: the command passed in the VM ($timing)"
	exit 0
fi

# Two VMs, one vCPU each: the build machines have two cores. NIC i of each
# VM is on a socket netdev, A listening on a loopback port and B connecting
# to it; each NIC's MAC tells /init which one it is (52:54:00:09:0N:0H for
# network 10.9.N.0/24 and host H, 1 for A and 2 for B).
smp=1
log_a=$build/console-a.log log_b=$build/console-b.log

# One run of the pair: boots both, waits for them and exits as the run
# ends (run in a subshell: die ends only it).
run_pair() {
	local attempt

	set -e
	for attempt in 1 2 3; do
		read -r port0 port1 < <(free_ports) || die "no free loopback port (python3 needed)"
		echo "run-vm.sh: booting A and B (TCG, ports $port0 and $port1), timeout ${timeout}s, consoles in $log_a and $log_b"
		# shellcheck disable=SC2046
		boot_vm "$log_a" '[A] ' ' rdmamem.host=a' -pidfile "$build/qemu-a.pid" \
			$(nics 1 listen) &
		vm_a=$!
		# B connects once A listens on both; another program may have taken a
		# port in the meantime, and then A stops at once: pick others.
		until listening "$port0" && listening "$port1"; do
			kill -0 "$vm_a" 2>/dev/null || break
			sleep 0.1
		done
		listening "$port0" && listening "$port1" && break
		wait "$vm_a" || true
		[ "$attempt" -lt 3 ] || die "qemu A could not listen on a loopback port 3 times; console: $log_a"
		echo "run-vm.sh: qemu A stopped before listening; again with other ports"
	done
	# shellcheck disable=SC2046
	boot_vm "$log_b" '[B] ' ' rdmamem.host=b' -pidfile "$build/qemu-b.pid" $(nics 2 connect) &
	vm_b=$!
	wait "$vm_a" || true
	# A's /init told B's agent to quit: B powers off within seconds. A B that
	# does not is stopped here, and its missing result fails the run.
	for _ in $(seq 600); do
		kill -0 "$vm_b" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$vm_b" 2>/dev/null; then
		echo "run-vm.sh: B still running 60 s after A finished: stopping it"
		kill "$(cat "$build/qemu-b.pid")" 2>/dev/null || true
	fi
	wait "$vm_b" || true
	t2=$(now)
	timing=$(awk -v a="$t0" -v b="$t1" -v c="$t2" \
		'BEGIN { printf "initramfs %.1fs, VMs %.1fs, total %.1fs", b - a, c - b, c - a }')
	# B first: a failure of A's command may come from B being gone.
	vm_result 'host B' "$log_b"
	result_b=$result
	vm_result 'host A' "$log_a"
	[ "$result_b" -eq 0 ] || die "host B's command (its agent) exited $result_b ($timing); console: $log_b"
	if [ "$result" -ne 0 ]; then
		echo "run-vm.sh: FAILED: the command exited $result on host A ($timing)" >&2
		exit "$result"
	fi
	echo "run-vm.sh: the command passed on host A, host B's agent ended cleanly ($timing)"
}

# The last heartbeats each VM printed (/init): alive or not, frames passed.
heartbeats() {
	local log

	for log in "$log_a" "$log_b"; do
		grep '^vmtest-heartbeat: ' "$log" | tail -n 3 | sed 's/^/run-vm.sh: /' >&2 || true
	done
}

# A qemu socket link between the VMs has been seen to stop carrying frames
# while a large transfer ran on it (on CI's two shared cores; here under
# TSan): both hosts' counters for that NIC froze, rx and tx, for minutes,
# with no word from either kernel. Over eth0 host B's agent is then
# unreachable ("cannot reach the agent"); over eth1 A's daemon cannot
# connect to B's ("no connection to 10.9.6.2:7471 within"). That is the
# bed failing, not the command: the pair runs once more, saying why, with
# the first run's consoles kept beside (.1). Any other failure, or that
# one twice, fails the run.
for round in 1 2; do
	set +e
	(run_pair)
	rc=$?
	set -e
	[ "$rc" -ne 0 ] || exit 0
	heartbeats
	if [ "$round" = 1 ] &&
		grep -Eq 'cannot reach the agent at|no connection to 10\.9\.[56]\.2:[0-9]+ within' "$log_a"; then
		cp "$log_a" "$log_a.1"
		cp "$log_b" "$log_b.1"
		echo "run-vm.sh: host B became unreachable from host A (a link between the VMs stopped; heartbeats above, consoles in $log_a.1 and $log_b.1): running the pair once more" >&2
		continue
	fi
	exit "$rc"
done
