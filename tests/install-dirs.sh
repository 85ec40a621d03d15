#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# What `make install` does with directories given late, and with ldconfig
# (make installcheck runs it before tests/installcheck.sh):
# - after a plain `make`, `make install PREFIX=/usr DESTDIR=D` gives a unit
#   that starts /usr/sbin/rdmamemd and an rdmamem.pc of prefix /usr, not
#   the /usr/local ones the first make wrote;
# - into the live system (no DESTDIR) as root it runs ldconfig, into a
#   DESTDIR it does not, and says so. LDCONFIG is a stand-in that logs
#   its calls: the test never touches the system's cache.
#
#   tests/install-dirs.sh MAKE
set -eu

make=${1:-make}
work=$(mktemp -d /tmp/rdmamemd-install-dirs.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "install-dirs: $*" >&2; exit 1; }

printf '#!/bin/sh\necho "ldconfig $*" >> %s/ldconfig.log\n' "$work" > "$work/ldconfig"
chmod +x "$work/ldconfig"

out=$($make -s install PREFIX=/usr DESTDIR="$work/root" LDCONFIG="$work/ldconfig") ||
	fail "make install PREFIX=/usr DESTDIR=... failed: $out"
unit=$work/root/usr/lib/systemd/system/rdmamemd.service
grep -qx 'ExecStart=/usr/sbin/rdmamemd' "$unit" ||
	fail "PREFIX=/usr at install: the unit says $(grep ExecStart "$unit")"
grep -qx 'prefix=/usr' "$work/root/usr/lib/pkgconfig/rdmamem.pc" ||
	fail "PREFIX=/usr at install: rdmamem.pc says" \
		"$(grep ^prefix "$work/root/usr/lib/pkgconfig/rdmamem.pc")"
[ ! -e "$work/ldconfig.log" ] || fail "ldconfig ran for an install into DESTDIR"
echo "$out" | grep -q 'ldconfig skipped (DESTDIR' ||
	fail "install into DESTDIR does not say ldconfig was skipped"

# The live system: a prefix of our own, SYSCONFDIR too (the default
# configuration file is installed there when absent).
live=$work/live
out=$($make -s install PREFIX="$live" SYSCONFDIR="$live/etc" LDCONFIG="$work/ldconfig") ||
	fail "make install PREFIX=$live failed: $out"
[ -e "$live/lib/librdmamem.so.0" ] || fail "make install PREFIX=$live installed no library"
if [ "$(id -u)" = 0 ]; then
	grep -qx 'ldconfig ' "$work/ldconfig.log" 2>/dev/null ||
		fail "ldconfig did not run for an install as root"
	echo "$out" | grep -q "$live/lib is not in the dynamic linker's path" ||
		fail "install into a prefix unknown to ld.so does not say so"
else
	[ ! -e "$work/ldconfig.log" ] || fail "ldconfig ran for an install as a user"
	echo "$out" | grep -q 'ldconfig skipped (not root)' ||
		fail "a user's install does not say ldconfig was skipped"
fi
echo "install-dirs: PREFIX at install time, ldconfig: ok"
