#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# What `make install DESTDIR=ROOT` laid out, checked the way a packager and
# a user would: every file in place, libraries (shared and static) that
# define only rdmamem_* (the shared one under its soname), a relocatable
# rdmamem.pc, man pages that render without warnings, a client built out of
# tree with `pkg-config --cflags --libs rdmamem` that talks to the
# installed daemon, and one linked statically with names of its own that
# the library uses inside.
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
. "$src/tests/start-daemon.sh"
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

# The soname, and no symbol outside the public API: neither library defines
# a global name but rdmamem_* (an application's own json_parse() would
# clash), and both define exactly the functions rdmamem.h declares.
readelf -d "$root$libdir/librdmamem.so" | grep -q 'SONAME.*\[librdmamem\.so\.0\]' ||
	fail "librdmamem.so has no soname librdmamem.so.0"
leaked=$(nm -D --defined-only "$root$libdir/librdmamem.so" | awk '$2 ~ /[TDBR]/ { print $3 }' |
	 grep -v '^rdmamem_' | grep -v '^RDMAMEM_' || true)
[ -z "$leaked" ] || fail "librdmamem.so exports more than rdmamem_*: $leaked"
nm -g --defined-only "$root$libdir/librdmamem.a" | awk 'NF == 3 { print $3 }' | sort > "$work/a.syms"
leaked=$(grep -v '^rdmamem_' "$work/a.syms" || true)
[ -z "$leaked" ] || fail "librdmamem.a defines globals beyond rdmamem_*: $(echo "$leaked" | tr '\n' ' ')"
nm -D --defined-only "$root$libdir/librdmamem.so" |
	awk '$3 ~ /^rdmamem_/ { sub(/@.*/, "", $3); print $3 }' | sort > "$work/so.syms"
sed -n 's/^[a-z][^(]*[ *]\(rdmamem_[a-z0-9_]*\)(.*/\1/p' "$root$prefix/include/rdmamem.h" |
	sort > "$work/h.syms"
[ -s "$work/h.syms" ] || fail "no function found in rdmamem.h"
cmp -s "$work/h.syms" "$work/so.syms" ||
	fail "librdmamem.so and rdmamem.h differ: $(diff "$work/h.syms" "$work/so.syms" | grep '^[<>]')"
cmp -s "$work/h.syms" "$work/a.syms" ||
	fail "librdmamem.a and rdmamem.h differ: $(diff "$work/h.syms" "$work/a.syms" | grep '^[<>]')"

# rdmamem.pc: libcjson for static links, directories under ${prefix} so
# that the tree can move (pkg-config --define-prefix, a sysroot).
pc=$root$libdir/pkgconfig/rdmamem.pc
grep -qx 'Requires.private: libcjson' "$pc" || fail "rdmamem.pc lacks Requires.private: libcjson"
case $libdir in
"$prefix"/*)
	grep -qx "libdir=\${prefix}${libdir#"$prefix"}" "$pc" || fail "rdmamem.pc: libdir not under \${prefix}"
	;;
esac
# shellcheck disable=SC2016
grep -qx 'includedir=${prefix}/include' "$pc" || fail "rdmamem.pc: includedir not \${prefix}/include"
if [ "$libdir" = "$prefix/lib" ]; then
	got=$(PKG_CONFIG_PATH="$root$libdir/pkgconfig" pkg-config --define-prefix --cflags --libs rdmamem) ||
		fail "pkg-config --define-prefix does not find rdmamem"
	case " $got " in
	*" -I$root$prefix/include "*"-L$root$libdir -lrdmamem "*) ;;
	*) fail "pkg-config --define-prefix gave: $got" ;;
	esac
	got=$(PKG_CONFIG_PATH="$root$libdir/pkgconfig" pkg-config --define-prefix --static --libs rdmamem)
	case " $got " in
	*" -lrdmamem "*"-lcjson "*) ;;
	*) fail "pkg-config --static --libs rdmamem gave: $got" ;;
	esac
fi

# Every function rdmamem.h declares has a page (its own, or a ".so" to the
# page of its group) whose NAME names it; every page renders without
# warnings (from the man root, where ".so man3/..." resolves).
man=$root$prefix/share/man
while read -r f; do
	p=$man/man3/$f.3
	[ -s "$p" ] || fail "man3/$f.3 missing: rdmamem.h declares $f (make man3)"
	so=$(sed -n 's/^\.so //p' "$p")
	[ -z "$so" ] || p=$man/$so
	sed -n '/^\.SH NAME/{n;p;}' "$p" | grep -qw "$f" || fail "man3/$f.3: NAME does not name $f"
done < "$work/h.syms"
for m in "$man"/man8/rdmamemd.8 "$man"/man1/rdmamemctl.1 "$man"/man3/*.3; do
	m=${m#"$man/"}
	w=$(cd "$man" && groff -man -ww -z "$m" 2>&1) || fail "$m: groff failed"
	[ -z "$w" ] || fail "$m: $w"
done

# A client program from outside the tree, built the documented way (the
# system's libcjson.pc for Requires.private).
export PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_PATH="$root$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs rdmamem) || fail "pkg-config does not find rdmamem"
cp "$src/examples/hello-region.c" "$work/"
# shellcheck disable=SC2086
(cd "$work" && $cc $cflags -Wall -Wextra -Werror hello-region.c $flags -o hello-region) ||
	fail "the example does not build against the installed header and library"
if readelf -d "$work/hello-region" | grep -q 'NEEDED.*librdmamem\.so\.0'; then :; else
	fail "hello-region does not link librdmamem.so.0"
fi
# One with json_parse() and base64_encode() of its own, linked statically.
cjson=$(PKG_CONFIG_SYSROOT_DIR='' pkg-config --libs libcjson)
# shellcheck disable=SC2086
(cd "$work" && $cc $cflags -Wall -Wextra -Werror -I"$root$prefix/include" \
	"$src/tests/install/static-clash.c" "$root$libdir/librdmamem.a" $cjson -o static-clash) ||
	fail "a program with its own json_parse() does not link with librdmamem.a"
if readelf -d "$work/static-clash" | grep -q 'NEEDED.*librdmamem'; then
	fail "static-clash links librdmamem.so"
fi

start_daemon installed "$root$prefix/sbin/rdmamemd" "$work/s.sock"
out=$(LD_LIBRARY_PATH="$root$libdir" "$work/hello-region" "$work/s.sock") || fail "hello-region: $out"
case $out in
"region "*": hello, region, shared") ;;
*) fail "hello-region said: $out" ;;
esac
out=$("$work/static-clash" "$work/s.sock" 2>&1) || fail "$out"
LD_LIBRARY_PATH="$root$libdir" "$root$prefix/bin/rdmamemctl" -s "$work/s.sock" status |
	grep -q "^rdmamemd 0" || fail "the installed rdmamemctl cannot read the status"
echo "installcheck: $root: layout, soname, exports, rdmamem.pc, man pages, out-of-tree clients: ok"
