#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# What `make install DESTDIR=ROOT` laid out, checked the way a packager and
# a user would: every file in place, a library that exports only rdmamem_*
# under its soname, man pages that render without warnings, and a client
# built out of tree with `pkg-config --cflags --libs rdmamem` that talks to
# the installed daemon.
#
#   tests/installcheck.sh ROOT PREFIX LIBDIR SYSCONFDIR [CC [CFLAGS]]
set -eu

root=$1 prefix=$2 libdir=$3 sysconfdir=$4 cc=${5:-cc} cflags=${6:-}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/rdmamemd-installcheck.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "installcheck: $*" >&2; exit 1; }

for f in sbin/rdmamemd bin/rdmamemctl include/rdmamem.h \
	 share/man/man8/rdmamemd.8 share/man/man1/rdmamemctl.1 share/man/man3/rdmamem.3 \
	 lib/systemd/system/rdmamemd.service lib/systemd/system/rdmamemd.socket \
	 lib/sysusers.d/rdmamemd.conf lib/tmpfiles.d/rdmamemd.conf \
	 share/bash-completion/completions/rdmamemctl share/zsh/vendor-completions/_rdmamemctl; do
	[ -s "$root$prefix/$f" ] || fail "$prefix/$f missing"
done
for f in librdmamem.so librdmamem.so.0 librdmamem.a pkgconfig/rdmamem.pc; do
	[ -e "$root$libdir/$f" ] || fail "$libdir/$f missing"
done
[ -s "$root$sysconfdir/rdmamemd/rdmamemd.conf" ] || fail "$sysconfdir/rdmamemd/rdmamemd.conf missing"
[ -x "$root$prefix/sbin/rdmamemd" ] || fail "rdmamemd is not executable"
grep -q "^ExecStart=$prefix/sbin/rdmamemd\$" "$root$prefix/lib/systemd/system/rdmamemd.service" ||
	fail "the unit does not start $prefix/sbin/rdmamemd"

# The soname, and no symbol outside the public API.
readelf -d "$root$libdir/librdmamem.so" | grep -q 'SONAME.*\[librdmamem\.so\.0\]' ||
	fail "librdmamem.so has no soname librdmamem.so.0"
leaked=$(nm -D --defined-only "$root$libdir/librdmamem.so" | awk '$2 ~ /[TDBR]/ { print $3 }' |
	 grep -v '^rdmamem_' | grep -v '^RDMAMEM_' || true)
[ -z "$leaked" ] || fail "librdmamem.so exports more than rdmamem_*: $leaked"

for m in man8/rdmamemd.8 man1/rdmamemctl.1 man3/rdmamem.3; do
	w=$(groff -man -ww -z "$root$prefix/share/man/$m" 2>&1) || fail "$m: groff failed"
	[ -z "$w" ] || fail "$m: $w"
done

# A client program from outside the tree, built the documented way.
export PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$root$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs rdmamem) || fail "pkg-config does not find rdmamem"
cp "$src/examples/hello-region.c" "$work/"
# shellcheck disable=SC2086
(cd "$work" && $cc $cflags -Wall -Wextra -Werror hello-region.c $flags -o hello-region) ||
	fail "the example does not build against the installed header and library"
if readelf -d "$work/hello-region" | grep -q 'NEEDED.*librdmamem\.so\.0'; then :; else
	fail "hello-region does not link librdmamem.so.0"
fi

"$root$prefix/sbin/rdmamemd" --config=/dev/null --socket "$work/s.sock" --log-level warning &
pid=$!
i=0
until [ -S "$work/s.sock" ]; do
	i=$((i + 1))
	[ $i -lt 500 ] || fail "the installed daemon did not start"
	sleep 0.01
done
out=$(LD_LIBRARY_PATH="$root$libdir" "$work/hello-region" "$work/s.sock") || fail "hello-region: $out"
case $out in
"region "*": hello, region, shared") ;;
*) fail "hello-region said: $out" ;;
esac
LD_LIBRARY_PATH="$root$libdir" "$root$prefix/bin/rdmamemctl" -s "$work/s.sock" status |
	grep -q "^rdmamemd 0" || fail "the installed rdmamemctl cannot read the status"
echo "installcheck: $root: layout, soname, exports, man pages, out-of-tree client: ok"
