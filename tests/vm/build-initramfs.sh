#!/bin/bash
# Builds the kernel and initramfs of the Soft-RoCE test VM.
#
#   tests/vm/build-initramfs.sh [--overlay DIR] BUILD_DIR [FILE...]
#
# BUILD_DIR/vmlinuz            Debian's stock kernel: ours has no InfiniBand
#                              support, Debian's has rdma_rxe as a module
# BUILD_DIR/initramfs.cpio.gz  busybox, iproute2, rdma-core's rxe provider and
#                              tools, perftest, the RDMA and virtio-net
#                              modules, tests/vm/init and the scripts run
#                              inside (smoke.sh, pair.sh, hostd.sh,
#                              perftest.sh, transferbench.sh), and every
#                              FILE at its own absolute path (the tests
#                              find their programs through paths compiled
#                              in), each with the libraries ldd names
#
# --overlay DIR is copied over the tree last (run-vm.sh puts /vmtest/run.sh
# there). --python adds Debian's python3 with its standard library (less what
# a test run never imports: the test suite, IDLE, Tk, ensurepip, pydoc's
# data, lib2to3, distutils, databases, curses, TLS and OpenSSL's hashes (their
# libraries are most of the size), the static library and optimized
# bytecode) and pytest with
# what it imports from /usr/lib/python3/dist-packages, for
# tests/python/test_rdma.py (make vmtest). The kernel package is downloaded once into BUILD_DIR/kernel and
# fetched again only when Debian moves linux-image-amd64 on.
set -eu -o pipefail

die() {
	echo "build-initramfs.sh: $*" >&2
	exit 1
}

# depmod and modprobe live in sbin, which a user's PATH may lack.
PATH=$PATH:/usr/sbin:/sbin
here=$(cd "$(dirname "$0")" && pwd)
overlay= python=0
while [ $# -gt 0 ]; do
	case $1 in
	--overlay)
		overlay=${2:?--overlay needs a directory}
		shift 2
		;;
	--python)
		python=1
		shift
		;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || die "usage: $0 [--overlay DIR] [--python] BUILD_DIR [FILE...]"
mkdir -p "$1"
build=$(cd "$1" && pwd)
shift

for tool in apt-get dpkg depmod modprobe cpio gzip ldd; do
	command -v "$tool" >/dev/null || die "$tool not found (make deps installs kmod, cpio)"
done

# The RDMA stack in the order tests/vm/README.md gives: rdma_rxe needs
# crc32_generic loaded first (it asks the crypto API for "crc32" by name, so
# no symbol dependency pulls it in), and librdmacm needs the CM modules. The
# virtio NIC drivers come before ib_core, for the two-VM bed's eth0 and eth1
# (virtio_pci is the bus driver no symbol of virtio_net pulls in); alone, the
# VM has no NIC and they find nothing.
MODULES="crc32_generic udp_tunnel ip6_udp_tunnel virtio_pci virtio_net ib_core ib_uverbs
	 rdma_rxe veth iw_cm ib_cm rdma_cm rdma_ucm"
LIBDIR=/usr/lib/x86_64-linux-gnu
# Paths as Debian packages them (iproute2, ibverbs-utils, rdmacm-utils,
# perftest, ibverbs-providers, busybox-static); libgcc_s is dlopened by
# pthread_exit.
TOOLS="/bin/ip /usr/bin/rdma /usr/bin/ibv_devices /usr/bin/ibv_devinfo
       /usr/bin/ibv_rc_pingpong /usr/bin/rping /usr/bin/ib_write_bw /usr/bin/ib_read_bw
       /usr/bin/ib_write_lat $LIBDIR/libibverbs/librxe-rdmav34.so
       /etc/libibverbs.d/rxe.driver $LIBDIR/libgcc_s.so.1"

# --- kernel -----------------------------------------------------------------

kdir=$build/kernel
mkdir -p "$kdir"
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
	awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-amd64$/ { print $2; exit }') || true
if [ -z "$pkg" ]; then
	# No package lists (offline, or never updated): a cached kernel will do.
	pkg=$(cat "$kdir/package" 2>/dev/null) ||
		die "apt-cache does not know linux-image-amd64: run apt-get update"
fi
kver=${pkg#linux-image-}
kroot=$kdir/$pkg
if [ ! -e "$kroot/.complete" ]; then
	echo "build-initramfs.sh: fetching $pkg (once; cached in $kdir)"
	rm -rf "${kdir:?}"/linux-image-* "$kdir/package"
	# apt-get download writes into the current directory. As root it would
	# warn that its _apt user cannot write there, and then do it as root.
	asroot=()
	[ "$(id -u)" != 0 ] || asroot=(-o APT::Sandbox::User=root)
	(cd "$kdir" && apt-get download -q "${asroot[@]}" "$pkg") ||
		die "apt-get download $pkg failed (stale package lists? run apt-get update)"
	dpkg -x "$kdir/$pkg"_*.deb "$kroot"
	# The package ships no modules.dep (its postinst makes it).
	depmod -b "$kroot" "$kver"
	rm -f "$kdir/$pkg"_*.deb
	echo "$pkg" >"$kdir/package"
	touch "$kroot/.complete"
fi
cp "$kroot/boot/vmlinuz-$kver" "$build/vmlinuz"

# --- root tree --------------------------------------------------------------

root=$build/root
rm -rf "$root"
mkdir -p "$root"/{dev,proc,sys,tmp,run,root,etc,usr/bin,usr/sbin,usr/lib,usr/lib64,vmtest}
# Mirror the host's merged /usr so ldd's /lib/... and /lib64/... paths, and
# the loader path compiled into every binary, resolve inside the VM too.
for d in bin sbin lib lib64; do
	if [ -L "/$d" ]; then
		ln -s "$(readlink "/$d")" "$root/$d"
	else
		mkdir -p "$root/$d"
	fi
done

# Copies a file to the same path under $root, with the shared libraries it
# needs. ldd fails on static binaries and scripts: those need none.
install_file() {
	local f=$1 libs lib
	mkdir -p "$root$(dirname "$f")"
	cp -L "$f" "$root$f"
	libs=$(ldd "$f" 2>/dev/null) || return 0
	if grep -q 'not found' <<<"$libs"; then
		die "$f: a shared library is missing: $(grep 'not found' <<<"$libs" | tr -s ' \t' ' ')"
	fi
	for lib in $(grep -o '/[^ ]*' <<<"$libs"); do
		if [ ! -e "$root$lib" ]; then
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		fi
	done
}

for f in $TOOLS; do
	[ -e "$f" ] || die "$f not found (make deps installs the packages the VM needs)"
	install_file "$f"
done
for f in "$@"; do
	# Relative names mean the caller's directory; the VM sees absolute paths.
	case $f in
	/*) ;;
	*) f=$PWD/$f ;;
	esac
	[ -e "$f" ] || die "$f not found (asked to add it to the VM)"
	# /init mounts devtmpfs, proc and sysfs there: a file below them would
	# be hidden, and the VM would answer "not found" for it.
	case $f in
	/dev/* | /proc/* | /sys/*)
		die "$f: the VM mounts over ${f%%/"${f#/*/}"}, which would hide it; build somewhere else (B=DIR)" ;;
	esac
	install_file "$f"
done

# busybox provides the rest, all in /usr/bin and only under names no real
# tool has taken (--install skips existing names; the links point at
# /usr/bin/busybox, which the VM has too).
install_file /bin/busybox
/bin/busybox --install -s "$root/usr/bin"

# --python: the interpreter, its standard library trimmed, the extension
# modules' libraries, pytest and what it imports. Byte code stays (.pyc of
# the plain optimization level), so that the guest does not compile the
# standard library under TCG at every boot.
install_python() {
	local py ver stdlib so
	py=$(readlink -f /usr/bin/python3)
	ver=${py##*/}
	stdlib=/usr/lib/$ver
	[ -x "$py" ] && [ -d "$stdlib" ] || die "python3 not found (make deps installs it)"
	[ -d /usr/lib/python3/dist-packages/pytest ] || die "pytest not found (python3-pytest)"
	install_file "$py"
	ln -sf "$ver" "$root/usr/bin/python3"
	mkdir -p "$root$stdlib" "$root/usr/lib/python3/dist-packages"
	tar -C "$stdlib" -cf - --exclude=./test --exclude=./idlelib --exclude=./tkinter \
		--exclude=./turtledemo --exclude=./ensurepip --exclude=./pydoc_data \
		--exclude=./lib2to3 --exclude='./config-*' --exclude=./dist-packages \
		--exclude=./site-packages --exclude='*/tests' --exclude='*/idle_test' \
		--exclude='*.opt-1.pyc' --exclude='*.opt-2.pyc' --exclude=./turtle.py \
		--exclude=./distutils --exclude=./sqlite3 --exclude=./dbm --exclude=./curses \
		--exclude=./venv --exclude=./xmlrpc --exclude=./wsgiref \
		--exclude='./lib-dynload/_test*' --exclude='./lib-dynload/_xxtest*' \
		--exclude='./lib-dynload/_tkinter*' --exclude='./lib-dynload/_ssl*' \
		--exclude='./lib-dynload/_hashlib*' --exclude='./lib-dynload/_dbm*' \
		--exclude='./lib-dynload/_gdbm*' --exclude='./lib-dynload/_sqlite3*' \
		--exclude='./lib-dynload/nis*' --exclude='./lib-dynload/_curses*' \
		--exclude='./lib-dynload/readline*' --exclude='./lib-dynload/xx*' . |
		tar -C "$root$stdlib" -xf -
	for so in "$root$stdlib"/lib-dynload/*.so; do
		install_file "${so#"$root"}"
	done
	tar -C /usr/lib/python3/dist-packages -cf - --exclude='*.opt-1.pyc' \
		--exclude='*.opt-2.pyc' pytest _pytest pluggy iniconfig py py.py attr |
		tar -C "$root/usr/lib/python3/dist-packages" -xf -
}
[ "$python" = 0 ] || install_python

install -m 755 "$here/init" "$root/init"
for f in smoke.sh pair.sh hostd.sh perftest.sh transferbench.sh; do
	install -m 755 "$here/$f" "$root/vmtest/$f"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"

# The modules with their dependencies, in load order, as insmod paths for
# /init (modprobe resolves them against the depmod'ed kernel tree).
: >"$root/etc/vmtest-modules"
for m in $MODULES; do
	modprobe -d "$kroot" -S "$kver" --show-depends "$m" ||
		die "module $m not in $pkg"
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' |
	while read -r ko; do
		rel=${ko#"$kroot"}
		mkdir -p "$root$(dirname "$rel")"
		cp "$ko" "$root$rel"
		echo "$rel" >>"$root/etc/vmtest-modules"
	done

if [ -n "$overlay" ]; then
	cp -a "$overlay/." "$root/"
fi

(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) |
	gzip -1 >"$build/initramfs.cpio.gz"
