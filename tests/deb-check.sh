#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# The Debian packages (debian/), built the way Debian builds them and
# checked the way a packager and a user would:
#
#   1. dpkg-buildpackage -us -uc -b in a copy of the tree (git's files, the
#      uncommitted ones too) under build/deb/, where the .deb files land;
#      the symbols file makes the build fail on a new or a missing symbol.
#   2. lintian: any error, or any warning without an override, fails; every
#      override must say why on a comment line above it.
#   3. What each package holds: the daemon with its units, sysusers and
#      tmpfiles (and the maintainer scripts that apply them), the library
#      under its soname, header, static library and .pc in -dev, the Python
#      package; then the unpacked daemon, CLI and Python package talk to
#      each other, with a client built against -dev by pkg-config.
#
#   tests/deb-check.sh VERSION      (make deb; VERSION: the Makefile's)
set -eu

version=$1
src=$(cd "$(dirname "$0")/.." && pwd)
out=$src/build/deb
. "$src/tests/start-daemon.sh"
fail() { echo "deb-check: $*" >&2; exit 1; }

changelog=$(cd "$src" && dpkg-parsechangelog -S Version)
[ "$changelog" = "$version" ] ||
	fail "debian/changelog is at $changelog, the Makefile at $version"

# 1. Build. The copy keeps the tree's own build/ out of the package build
# and the .deb files in build/deb (dpkg-buildpackage writes to ..).
rm -rf "$out"
tree=$out/rdmamemd-$version
mkdir -p "$tree"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z -co --exclude-standard |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar -cf - --null -T -) | tar -xf - -C "$tree"
else
	(cd "$src" && tar -cf - --exclude=./build .) | tar -xf - -C "$tree"
fi
# Debian's own tools and interpreter, as in a build chroot: a python3 earlier
# on PATH (pyenv's, say) lacks Debian's build modules.
echo "deb-check: dpkg-buildpackage -us -uc -b (log: $out/build.log)"
if ! (cd "$tree" && PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	fail "dpkg-buildpackage failed"
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
changes=$out/rdmamemd_${version}_$arch.changes
[ -f "$changes" ] || fail "no $changes"

# 2. lintian, on the .changes (every package and the .buildinfo).
for o in "$src"/debian/*.lintian-overrides; do
	[ -e "$o" ] || continue
	awk -v f="${o##*/}" '
		/^[ \t]*$/ { why = 0; next }
		/^#/ { why = 1; next }
		!why { print f ": override without a reason above it: " $0; bad = 1 }
		END { exit bad }' "$o" >&2 || fail "explain each lintian override"
done
echo "deb-check: lintian"
if ! PATH=/usr/sbin:/usr/bin:/sbin:/bin lintian --fail-on error,warning --display-info "$changes" >"$out/lintian.log" 2>&1; then
	cat "$out/lintian.log" >&2
	fail "lintian: errors or warnings"
fi
cat "$out/lintian.log"

# 3. Contents.
deb() { echo "$out/${1}_${version}_${2:-$arch}.deb"; }
has() {
	dpkg-deb -c "$(deb "$1" "${3:-}")" | awk '{ print $6 }' | grep -qx "$2" ||
		fail "$1 lacks $2"
}
for f in ./usr/sbin/rdmamemd ./usr/bin/rdmamemctl ./etc/rdmamemd/rdmamemd.conf \
	 ./lib/systemd/system/rdmamemd.service ./lib/systemd/system/rdmamemd.socket \
	 ./usr/lib/sysusers.d/rdmamemd.conf ./usr/lib/tmpfiles.d/rdmamemd.conf \
	 ./usr/share/man/man8/rdmamemd.8.gz ./usr/share/man/man1/rdmamemctl.1.gz \
	 ./usr/share/bash-completion/completions/rdmamemctl ./usr/share/zsh/vendor-completions/_rdmamemctl; do
	has rdmamemd "$f"
done
for f in "./usr/lib/$ma/librdmamem.so.0" "./usr/lib/$ma/librdmamem.so.$version"; do
	has librdmamem0 "$f"
done
for f in ./usr/include/rdmamem.h "./usr/lib/$ma/librdmamem.so" "./usr/lib/$ma/librdmamem.a" \
	 "./usr/lib/$ma/pkgconfig/rdmamem.pc" ./usr/share/man/man3/rdmamem.3.gz; do
	has librdmamem-dev "$f"
done
has python3-rdmamem ./usr/lib/python3/dist-packages/rdmamem/__init__.py all
# rdmamem(3) and a page per function (docs/man3/), links included.
n=$(dpkg-deb -c "$(deb librdmamem-dev)" | awk '{ print $6 }' | grep -c '^\./usr/share/man/man3/rdmamem.*\.3\.gz$')
want=$(($(find "$src/docs/man3" -name 'rdmamem_*.3' | wc -l) + 1))
[ "$n" -eq "$want" ] || fail "librdmamem-dev has $n section 3 pages, the tree $want"

x=$out/root
for p in rdmamemd librdmamem0 librdmamem-dev; do
	dpkg-deb -x "$(deb $p)" "$x"
	dpkg-deb -e "$(deb $p)" "$out/control-$p"
done
dpkg-deb -x "$(deb python3-rdmamem all)" "$x"

# The daemon's package: units for /usr/sbin, the configuration a conffile,
# and postinst creating the user and the runtime directory and enabling the
# socket (debhelper's snippets, generated from the files themselves).
grep -qx 'ExecStart=/usr/sbin/rdmamemd' "$x/lib/systemd/system/rdmamemd.service" ||
	fail "rdmamemd.service does not start /usr/sbin/rdmamemd"
grep -qx /etc/rdmamemd/rdmamemd.conf "$out/control-rdmamemd/conffiles" ||
	fail "rdmamemd.conf is not a conffile"
# The user before the directory that names its group; the socket enabled
# and started, the service neither (socket activation) but restarted on
# upgrade when it runs.
post=$out/control-rdmamemd/postinst
for s in "systemd-sysusers.* rdmamemd.conf" "systemd-tmpfiles .*--create rdmamemd.conf" \
	 "deb-systemd-helper enable 'rdmamemd.socket'" "deb-systemd-invoke \$_dh_action 'rdmamemd.socket'" \
	 "deb-systemd-invoke try-restart 'rdmamemd.service'"; do
	grep -q "$s" "$post" || fail "rdmamemd's postinst lacks $s"
done
[ "$(grep -n systemd-sysusers "$post" | head -1 | cut -d: -f1)" -lt "$(grep -n systemd-tmpfiles "$post" | head -1 | cut -d: -f1)" ] ||
	fail "rdmamemd's postinst runs tmpfiles before sysusers"
# (debhelper's enable snippet is the one that says was-enabled defaults to true)
! grep -A1 "was-enabled defaults to true" "$post" | grep -q "rdmamemd.service" &&
	! grep -q "deb-systemd-invoke \$_dh_action 'rdmamemd.service'" "$post" ||
	fail "rdmamemd's postinst enables or starts the service (socket activation starts it)"
dpkg-deb -f "$(deb rdmamemd)" Depends | grep -q 'systemd-sysusers' ||
	fail "rdmamemd does not depend on a systemd-sysusers"

# The library: its soname, a shlibs and a symbols file naming it, and the
# symbols file listing exactly what the library exports.
lib=$x/usr/lib/$ma/librdmamem.so.$version
readelf -d "$lib" | grep -q 'SONAME.*\[librdmamem\.so\.0\]' || fail "no soname librdmamem.so.0"
[ "$(readlink "$x/usr/lib/$ma/librdmamem.so.0")" = "librdmamem.so.$version" ] ||
	fail "librdmamem.so.0 does not point at librdmamem.so.$version"
[ "$(readlink "$x/usr/lib/$ma/librdmamem.so")" = "librdmamem.so.0" ] ||
	fail "-dev's librdmamem.so does not point at librdmamem.so.0"
grep -q '^librdmamem 0 librdmamem0' "$out/control-librdmamem0/shlibs" || fail "no shlibs"
grep -q '^librdmamem.so.0 librdmamem0 ' "$out/control-librdmamem0/symbols" || fail "no symbols"
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { sub("@@", "@", $3); print $3 }' | sort)
listed=$(awk '/^ / && $1 !~ /^RDMAMEM_/ { print $1 }' "$out/control-librdmamem0/symbols" | sort)
[ "$exported" = "$listed" ] ||
	fail "the symbols file and the library differ: $(echo "$exported" | diff - /dev/fd/3 3<<EOF || true
$listed
EOF
)"
pc=$(PKG_CONFIG_PATH=$x/usr/lib/$ma/pkgconfig pkg-config --variable=libdir rdmamem) ||
	fail "pkg-config does not find -dev's rdmamem.pc"
[ "$pc" = "/usr/lib/$ma" ] || fail "rdmamem.pc's libdir is $pc, not /usr/lib/$ma"
dpkg-deb -f "$(deb rdmamemd)" Depends | grep -q 'libcjson1' || fail "rdmamemd: no shlibs Depends"
dpkg-deb -f "$(deb python3-rdmamem all)" Depends | grep -q "librdmamem0 (>= $version)" ||
	fail "python3-rdmamem does not depend on librdmamem0"

# The unpacked daemon, with the unpacked CLI and Python package as clients.
work=$(mktemp -d /tmp/rdmamemd-deb.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
start_daemon packaged "$x/usr/sbin/rdmamemd" "$work/s.sock"
# A client built the documented way against -dev (pkg-config, the unpacked
# tree as the sysroot), run with librdmamem0's library.
flags=$(PKG_CONFIG_SYSROOT_DIR=$x PKG_CONFIG_PATH=$x/usr/lib/$ma/pkgconfig \
	pkg-config --cflags --libs rdmamem) || fail "pkg-config --cflags --libs rdmamem failed"
# shellcheck disable=SC2086
cc -Wall -Wextra -Werror "$src/examples/hello-region.c" $flags -o "$work/hello-region" ||
	fail "examples/hello-region.c does not build against librdmamem-dev"
said=$(LD_LIBRARY_PATH=$x/usr/lib/$ma "$work/hello-region" "$work/s.sock") || fail "hello-region: $said"
case $said in
"region "*": hello, region, shared") ;;
*) fail "hello-region said: $said" ;;
esac
"$x/usr/bin/rdmamemctl" -s "$work/s.sock" status | grep -q "^rdmamemd $version" ||
	fail "the packaged rdmamemctl cannot read the status"
PYTHONPATH=$x/usr/lib/python3/dist-packages RDMAMEM_LIBRARY=$x/usr/lib/$ma/librdmamem.so.0 \
	/usr/bin/python3 -c '
import sys, rdmamem
assert rdmamem.__file__.startswith(sys.argv[1]), rdmamem.__file__
with rdmamem.Client(sys.argv[2]) as c:
    r = c.alloc(4096)
    r.memoryview()[:5] = b"hello"
    assert bytes(r.memoryview()[:5]) == b"hello"
' "$x/usr/lib/python3/dist-packages" "$work/s.sock" ||
	fail "the packaged Python package cannot register memory with the packaged daemon"
echo "deb-check: $(cd "$out" && ls ./*.deb | tr '\n' ' ')lintian clean, contents ok"
