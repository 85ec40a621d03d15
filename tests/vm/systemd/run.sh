#!/bin/bash
# The units under a real systemd: boots a Debian root file system (the
# host's release, Debian 12 on the project's machines) with
# systemd as PID 1 in qemu (TCG) and checks rdmamemd there as installed by
# its Debian packages (dpkg -i in the running guest: the maintainer scripts'
# sysusers, tmpfiles and socket) or by `make install PREFIX=/usr`:
# sysusers/tmpfiles, socket activation with
# SocketGroup=rdmamem, Type=notify, User=rdmamemd with CAP_IPC_LOCK alone,
# the sandbox (ProtectSystem=strict, ProtectHome, PrivateTmp, DevicePolicy=
# closed against a Soft-RoCE device), WatchdogSec, reload under a connected
# client, journal fields, stop. `make vmsystemd` runs it; it is not part of
# `make check` (about 5 minutes the first time, 2-3 after).
#
#   tests/vm/systemd/run.sh {--debs DIR | --objdir B} --kernel-dir DIR --build-dir DIR [--timeout SEC]
#
# --debs        where `make deb` left the .deb files (build/deb): rdmamemd,
#               librdmamem0 and python3-rdmamem are installed in the guest
# --objdir      a build with PREFIX=/usr (make B=build/vm-usr PREFIX=/usr all):
#               installed into the guest with make install DESTDIR=
# --kernel-dir  the Soft-RoCE VM's build dir (build/vm): its cached Debian
#               kernel and modules are used (build-initramfs.sh fetches them
#               when missing)
# --build-dir   here: rootfs-KEY.tar (mmdebstrap, cached by package list),
#               root/ and root.img (made anew each run), initramfs.cpio.gz,
#               console.log, and after the run journal.txt,
#               rdmamemd-verbose.txt and security.txt (systemd-analyze
#               security) copied out of the guest's disk
#
# Guest side: tests/vm/systemd/test.sh, run by vmsystemd-test.service once the
# system is up; it prints "vmsystemd: PASS/FAIL: ..." lines, "N passed,
# N failed" and "VMTEST-RESULT rc=N", then the unit powers the VM off.
# Every way of not getting that line fails with a message: never a skip.
set -eu -o pipefail

die() {
	echo "vmsystemd: FAILED: $*" >&2
	exit 1
}

now() {
	date +%s.%N
}

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
objdir='' debs='' kdir='' build='' timeout=900
while [ $# -gt 0 ]; do
	case $1 in
	--objdir) objdir=${2:?} ;;
	--debs) debs=${2:?} ;;
	--kernel-dir) kdir=${2:?} ;;
	--build-dir) build=${2:?} ;;
	--timeout) timeout=${2:?} ;;
	*) die "unknown argument '$1' (see the usage at the top of $0)" ;;
	esac
	shift 2
done
[ -n "$objdir$debs" ] && { [ -z "$objdir" ] || [ -z "$debs" ]; } && [ -n "$kdir" ] && [ -n "$build" ] ||
	die "usage: $0 {--debs DIR | --objdir B} --kernel-dir DIR --build-dir DIR [--timeout SEC]"
[ "$(id -u)" = 0 ] || die "needs root: the guest's files must belong to root and rdmamemd"
PATH=$PATH:/usr/sbin:/sbin
mkdir -p "$build" "$kdir"
build=$(cd "$build" && pwd)
kdir=$(cd "$kdir" && pwd)
[ -z "$objdir" ] || objdir=$(cd "$objdir" && pwd)
[ -z "$debs" ] || debs=$(cd "$debs" && pwd)
t0=$(now)

# Host tools; installed here rather than by `make deps`, which every build
# runs and which needs none of them.
need=()
for t in mmdebstrap:mmdebstrap mke2fs:e2fsprogs debugfs:e2fsprogs busybox:busybox-static \
	 qemu-system-x86_64:qemu-system-x86 depmod:kmod cpio:cpio; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "vmsystemd: installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" ||
		die "apt-get install ${need[*]} failed (run apt-get update?)"
fi

# --- kernel: the one the Soft-RoCE VM uses -------------------------------------
if [ ! -e "$kdir/kernel/package" ]; then
	"$src/tests/vm/build-initramfs.sh" "$kdir" || die "could not fetch the kernel"
fi
kpkg=$(cat "$kdir/kernel/package")
kver=${kpkg#linux-image-}
kroot=$kdir/kernel/$kpkg
[ -e "$kroot/.complete" ] || die "$kroot is incomplete: remove $kdir/kernel and rerun"

# --- the Debian root file system, cached ---------------------------------------
# The host's release from the host's own apt sources: the daemon was built
# against the host's libraries, and the guest gets the same versions.
suite=$(. /etc/os-release && echo "${VERSION_CODENAME-}")
[ -n "$suite" ] || die "/etc/os-release names no VERSION_CODENAME: not Debian?"
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources; do
	! grep -qs '^[^#]' "$f" || sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || die "no Debian apt sources on this host to build the guest from"
# The daemon's run-time libraries (ldd build/release/rdmamemd), systemd,
# rdma-core for its module loading units, what test.sh uses, and python3
# for python3-rdmamem.
pkgs=systemd,systemd-sysv,udev,dbus,libuv1,libcjson1,libinih1,libmicrohttpd12,libibverbs1,librdmacm1
pkgs=$pkgs,ibverbs-providers,rdma-core,ibverbs-utils,iproute2,procps,kmod,jq,python3
key=$( (echo "$suite $pkgs" && cat "${sources[@]}") | sha1sum | cut -c1-12)
tarball=$build/rootfs-$key.tar
if [ ! -s "$tarball" ]; then
	echo "vmsystemd: building the Debian $suite root file system from ${sources[*]} (once; cached as $tarball)"
	rm -f "$build"/rootfs-*.tar
	mmdebstrap --quiet --variant=minbase --mode=root --format=tar --include="$pkgs" \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		"$suite" "$tarball.tmp" "${sources[@]}" ||
		die "mmdebstrap failed (is the Debian archive of ${sources[*]} reachable?)"
	mv "$tarball.tmp" "$tarball"
fi
t1=$(now)

root=$build/root
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$tarball"

# --- rdmamemd: its packages, or make install -----------------------------------
if [ -n "$debs" ]; then
	# test.sh installs what it finds here with dpkg -i, under the guest's
	# systemd, so the maintainer scripts run as on a real host. -dev is
	# left out (it needs libcjson-dev); the test clients are built here
	# against its header and library.
	mkdir -p "$root/var/cache/vmsystemd/debs"
	for p in rdmamemd librdmamem0 python3-rdmamem; do
		f=$(ls "$debs/${p}"_*.deb 2>/dev/null | head -n 1)
		[ -n "$f" ] || die "no ${p}_*.deb in $debs (make deb)"
		cp "$f" "$root/var/cache/vmsystemd/debs/"
	done
	dev=$build/dev
	rm -rf "$dev"
	for f in "$debs"/librdmamem0_*.deb "$debs"/librdmamem-dev_*.deb; do
		dpkg-deb -x "$f" "$dev" || die "dpkg-deb -x $f failed"
	done
	inc=$dev/usr/include
	lib=$dev/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
else
	make -C "$src" --no-print-directory -s B="$objdir" PREFIX=/usr install DESTDIR="$root" >/dev/null ||
		die "make install DESTDIR=$root failed"
	grep -qx 'ExecStart=/usr/sbin/rdmamemd' "$root/usr/lib/systemd/system/rdmamemd.service" ||
		die "$objdir/rdmamemd.service was not made with PREFIX=/usr (rm it, or use another B)"
	inc=$root/usr/include lib=$root/usr/lib
fi
for c in hello-region:"$src/examples/hello-region.c" hold-client:"$here/hold-client.c" \
	keep-client:"$here/keep-client.c"; do
	cc -O2 -Wall -Wextra -Werror -I"$inc" "${c#*:}" -L"$lib" -lrdmamem \
		-o "$root/usr/local/bin/${c%%:*}" || die "could not build ${c%%:*}"
done
# What keeping a VMM region's files rests on (util/fdhold), under PID 1.
cc -O2 -Wall -Wextra -Werror -I"$src" "$here/fdhold-service.c" "$src/util/fdhold.c" \
	"$src/util/sockio.c" -lsystemd -o "$root/usr/local/bin/fdhold-service" ||
	die "could not build fdhold-service"
install -Dm755 "$here/test.sh" "$root/usr/local/libexec/vmsystemd/test.sh"
install -Dm644 "$here/vmsystemd-test.service" "$root/etc/systemd/system/vmsystemd-test.service"
ln -sf ../vmsystemd-test.service "$root/etc/systemd/system/multi-user.target.wants/"
install -Dm644 "$here/rdmamemd-vmtest.conf" "$root/etc/systemd/system/rdmamemd.service.d/vmtest.conf"

# A fixed machine id: an empty one means first boot, when systemd enables
# every unit by preset (rdmamemd.service too, which the test starts only
# through its socket).
echo 0123456789abcdef0123456789abcdef >"$root/etc/machine-id"
echo vmsystemd >"$root/etc/hostname"
# The serial console is the test's; nothing else of use runs at boot.
for u in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
	 e2scrub_all.timer e2scrub_reap.service fstrim.timer; do
	ln -sf /dev/null "$root/etc/systemd/system/$u"
done

# Kernel modules: the RDMA stack for Soft-RoCE and whatever rdma-core's
# module lists name (rdma-load-modules@rdma.service loads those), with
# their dependencies.
mods="crc32_generic rdma_rxe veth ib_uverbs rdma_ucm ib_umad"
mods="$mods $(cat "$root"/etc/rdma/modules/*.conf | sed 's/#.*//')"
for m in $mods; do
	modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null ||
		echo "vmsystemd: note: module $m is not in $kpkg" >&2
done | awk '$1 == "insmod" { print $2 }' | sort -u | while read -r ko; do
	rel=${ko#"$kroot"}
	mkdir -p "$root/usr$(dirname "$rel")"
	cp "$ko" "$root/usr$rel"
done
cp "$kroot/lib/modules/$kver/modules.order" "$kroot/lib/modules/$kver/modules.builtin"* \
	"$root/usr/lib/modules/$kver/"
depmod -b "$root/usr" "$kver"

img=$build/root.img
rm -f "$img"
mke2fs -q -t ext4 -L vmroot -d "$root" "$img" 2G >/dev/null || die "mke2fs -d $root failed"

# --- the initramfs: busybox, the disk's modules, init ---------------------------
ird=$build/initramfs
rm -rf "$ird"
mkdir -p "$ird"/{bin,dev,proc,sys,etc}
cp "$(command -v busybox)" "$ird/bin/busybox"
for a in $(busybox --list); do
	[ -e "$ird/bin/$a" ] || ln -s busybox "$ird/bin/$a"
done
install -m755 "$here/init" "$ird/init"
: >"$ird/etc/vmsystemd-modules"
for m in virtio_pci virtio_blk crc32c_generic ext4; do
	modprobe -d "$kroot" -S "$kver" --show-depends "$m" || die "module $m not in $kpkg"
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' | while read -r ko; do
	rel=${ko#"$kroot"}
	mkdir -p "$ird$(dirname "$rel")"
	cp "$ko" "$ird$rel"
	echo "$rel" >>"$ird/etc/vmsystemd-modules"
done
(cd "$ird" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 >"$build/initramfs.cpio.gz"
cp "$kroot/boot/vmlinuz-$kver" "$build/vmlinuz"
t2=$(now)

# --- boot ----------------------------------------------------------------------
log=$build/console.log
echo "vmsystemd: booting $kpkg with systemd under qemu (TCG), timeout ${timeout}s, console in $log"
set +e
timeout -k 10 "$timeout" qemu-system-x86_64 -accel tcg -m 2048 -smp 2 \
	-nographic -no-reboot -nic none \
	-drive file="$img",if=virtio,format=raw \
	-kernel "$build/vmlinuz" -initrd "$build/initramfs.cpio.gz" \
	-append 'console=ttyS0 quiet panic=-1 systemd.show_status=error' </dev/null 2>&1 |
	sed -u -e 's/\r$//' -e 's/\x1b[^a-zA-Z]*[a-zA-Z]//g' | tee "$log"
qemu_rc=${PIPESTATUS[0]}
set -e
t3=$(now)

# The guest's own record, off its disk.
rm -f "$build/journal.txt" "$build/rdmamemd-verbose.txt" "$build/security.txt"
for f in journal.txt rdmamemd-verbose.txt security.txt; do
	debugfs -R "dump /var/log/vmsystemd/$f $build/$f" "$img" >/dev/null 2>&1 || true
done

timing=$(awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN {
	printf "rootfs %.1fs, image %.1fs, VM %.1fs, total %.1fs", b - a, c - b, d - c, d - a }')
result=$(sed -n 's/^VMTEST-RESULT rc=\([0-9]*\)$/\1/p' "$log" | tail -n 1)
if [ -z "$result" ]; then
	[ "$qemu_rc" -ne 124 ] && [ "$qemu_rc" -ne 137 ] ||
		die "the VM did not finish within ${timeout}s ($timing); console: $log"
	reason=$(sed -n 's/^VMTEST-SETUP-FAILED: //p' "$log")
	[ -z "$reason" ] || die "VM setup failed: $reason ($timing); console: $log"
	die "the VM stopped without a result line (qemu exit $qemu_rc, $timing); console: $log"
fi
[ "$qemu_rc" -eq 0 ] || die "qemu exited $qemu_rc after the test finished with $result"
if [ "$result" -ne 0 ]; then
	echo "vmsystemd: FAILED: $(grep -c '^vmsystemd: FAIL:' "$log") checks failed in the VM ($timing);" \
		"guest journal: $build/journal.txt" >&2
	exit 1
fi
echo "vmsystemd: all checks passed under systemd ($timing)"
