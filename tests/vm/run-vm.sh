#!/bin/bash
# Runs one shell command inside the Soft-RoCE test VM and exits with its
# status.
#
#   tests/vm/run-vm.sh --build-dir DIR --cmd 'COMMAND' [--add FILE]...
#                      [--path DIR]... [--timeout SEC]
#
# Builds the kernel and initramfs into the build dir (build-initramfs.sh; the
# kernel is cached), boots it under qemu with TCG (a guest hangs under KVM on
# our machines), streams the console to stdout and DIR/console.log, and reads
# the exit status from /init's "VMTEST-RESULT rc=N" line.
#
# --add FILE   copy FILE (and its libraries) into the VM at its absolute path
# --path DIR   put DIR first on the command's PATH (repeatable)
# --timeout    wall-clock limit for the whole boot and run (default 600 s)
#
# The command runs as root under busybox sh, from the caller's directory, with
# RDMAMEM_VM=1, RDMAMEM_RXE_DEV=rxe0 and RDMAMEM_RXE_ADDR=10.9.0.1. Every way
# of not getting a result (no boot, panic, timeout, no marker) exits non-zero
# with a message: a VM test is never skipped.
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
build='' cmd='' timeout=600
adds=() paths=()
while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) build=${2:?--build-dir needs a directory} ;;
	--cmd) cmd=${2:?--cmd needs a command} ;;
	--add) adds+=("${2:?--add needs a file}") ;;
	--path) paths+=("${2:?--path needs a directory}") ;;
	--timeout) timeout=${2:?--timeout needs seconds} ;;
	*) die "unknown argument '$1' (see the usage at the top of $0)" ;;
	esac
	shift 2
done
[ -n "$build" ] && [ -n "$cmd" ] || die "usage: $0 --build-dir DIR --cmd COMMAND [--add FILE]... [--path DIR]... [--timeout SEC]"
command -v qemu-system-x86_64 >/dev/null ||
	die "qemu-system-x86_64 not found: install qemu-system-x86 (make deps does)"

t0=$(now)
mkdir -p "$build"
overlay=$build/overlay
rm -rf "$overlay"
mkdir -p "$overlay/vmtest"
{
	echo "# Written by run-vm.sh"
	for p in "${paths[@]}"; do
		echo "PATH=$(quote "$p"):\$PATH"
	done
	echo "mkdir -p $(quote "$PWD") && cd $(quote "$PWD") || exit 125"
	printf '%s\n' "$cmd"
} >"$overlay/vmtest/run.sh"
"$here/build-initramfs.sh" --overlay "$overlay" "$build" "${adds[@]}" ||
	die "could not build the VM (see above)"
t1=$(now)

log=$build/console.log
echo "run-vm.sh: booting $(cat "$build/kernel/package") under qemu (TCG), timeout ${timeout}s, console in $log"
# stdin from /dev/null: qemu leaves the terminal alone and never waits on it.
# No NIC: the VM's network is a veth pair inside it. sed drops the serial
# line's CRs and the BIOS's escape sequences, which would reset the caller's
# terminal and wipe the host test output above.
set +e
timeout -k 10 "$timeout" qemu-system-x86_64 -accel tcg -m 1024 -smp 2 \
	-nographic -no-reboot -nic none \
	-kernel "$build/vmlinuz" -initrd "$build/initramfs.cpio.gz" \
	-append 'console=ttyS0 quiet panic=-1' </dev/null 2>&1 |
	sed -u -e 's/\r$//' -e 's/\x1b[^a-zA-Z]*[a-zA-Z]//g' | tee "$log"
qemu_rc=${PIPESTATUS[0]}
set -e
t2=$(now)

timing=$(awk -v a="$t0" -v b="$t1" -v c="$t2" \
	'BEGIN { printf "initramfs %.1fs, VM %.1fs, total %.1fs", b - a, c - b, c - a }')
init_at=$(sed -n 's/^vmtest: init started at \(.*\)s$/\1/p' "$log")
[ -z "$init_at" ] || timing="$timing (guest reached /init at ${init_at}s uptime)"

result=$(sed -n 's/^VMTEST-RESULT rc=\([0-9]*\)$/\1/p' "$log" | tail -n 1)
if [ -z "$result" ]; then
	[ "$qemu_rc" -ne 124 ] && [ "$qemu_rc" -ne 137 ] ||
		die "the VM did not finish within ${timeout}s ($timing); console: $log"
	reason=$(sed -n 's/^VMTEST-SETUP-FAILED: //p' "$log")
	[ -z "$reason" ] || die "VM setup failed: $reason ($timing); console: $log"
	[ -n "$init_at" ] || die "the VM never reached /init (qemu exit $qemu_rc, $timing); console: $log"
	die "the VM stopped without a result line (qemu exit $qemu_rc, $timing); console: $log"
fi
[ "$qemu_rc" -eq 0 ] || die "qemu exited $qemu_rc after the command finished with $result"
if [ "$result" -ne 0 ]; then
	echo "run-vm.sh: FAILED: the command exited $result in the VM ($timing)" >&2
	exit "$result"
fi
echo "run-vm.sh: the command passed in the VM ($timing)"
