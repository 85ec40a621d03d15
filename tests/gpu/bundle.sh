#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Packs built programs, and the shared libraries a GPU machine lacks, into
# one folder for the device tool: that machine (Ubuntu 24.04) has glibc, the
# NVIDIA driver and rdma-core, but not libuv, cJSON, Check or libsystemd, and
# nothing can be installed there. See tests/gpu/README.md.
#
#   tests/gpu/bundle.sh [-B BUILD_DIR] [-o DEST] [PROGRAM...]
#
# PROGRAM defaults to whichever of rdmamemd, rdmamemctl, test-rdmamemd,
# cuda-smoke, examples/async-uv and the benchmarks BUILD_DIR (build/release)
# holds, with redis-server and redis-benchmark from PATH (bench-pipeline's
# anchor). DEST defaults to .device/cuda in the repository's main checkout:
# the device tool sends that checkout, also when this script runs in another
# worktree, and .device/ is git-ignored.
#
# DEST gets bin/ (the programs), lib/ (their libraries and librdmamem.so.0),
# src/proto/ (the IDL files the tests read), src/python and src/tests/python
# (the Python package, as pip installs it, and its tests), src/bench/*.py and
# src/docs/python-api.md (its benchmark and API reference), MANIFEST, and
# run.sh, which runs a program with LD_LIBRARY_PATH, PATH, PYTHONPATH and
# RDMAMEM_LIBRARY pointing into the bundle:
#
#   .device/cuda/run.sh cuda-smoke
set -euo pipefail

die() {
	echo "bundle.sh: $*" >&2
	exit 1
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build/release
dest=

while getopts "B:o:h" opt; do
	case $opt in
	B) build=$OPTARG ;;
	o) dest=$OPTARG ;;
	*)
		sed -n '4,22s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))

case $build in
/*) ;;
*) build=$root/$build ;;
esac
[ -d "$build" ] || die "no build directory $build (run make first)"
build=$(cd "$build" && pwd)

if [ -z "$dest" ]; then
	common=$(git -C "$root" rev-parse --path-format=absolute --git-common-dir)
	dest=$(dirname "$common")/.device/cuda
fi
mkdir -p "$(dirname "$dest")"
dest=$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")

if [ $# -eq 0 ]; then
	for p in rdmamemd rdmamemctl test-rdmamemd cuda-smoke examples/async-uv bench-calls \
		bench-pipeline bench-ping bench-region bench-gpu; do
		[ -x "$build/$p" ] && set -- "$@" "$build/$p"
	done
	[ $# -gt 0 ] || die "nothing built in $build"
	# bench-pipeline's anchor, which the GPU machine lacks: the server
	# (Debian's is a link to redis-check-rdb, which picks its role by the
	# name it is run as) and redis-benchmark.
	for p in redis-server redis-benchmark; do
		path=$(command -v "$p") && set -- "$@" "$path"
	done
fi

# Only ever delete a folder this script made.
if [ -e "$dest" ]; then
	[ -f "$dest/MANIFEST" ] || [ -z "$(ls -A "$dest")" ] ||
		die "$dest exists and is not a bundle; remove it yourself"
	rm -rf "$dest"
fi
mkdir -p "$dest/bin" "$dest/lib" "$dest/src/proto"

# What the GPU machine has itself, and must keep using: glibc (a newer one
# than ours), the compiler runtime, rdma-core (its providers must match its
# libibverbs) and the driver.
skip='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libgcc_s|libstdc\+\+|libibverbs|librdmacm|libmlx[45]|libefa|libnl-3|libnl-route-3|libcuda|libnvidia-[^ ]*)\.so'

declare -A libs=()
for prog in "$@"; do
	[ -x "$prog" ] || die "$prog is not an executable"
	# Where the build had it (bin/ stands for the build directory there):
	# the tests run examples by their build path.
	case $prog in
	"$build"/*/*)
		mkdir -p "$dest/bin/$(dirname "${prog#"$build"/}")"
		cp -L "$prog" "$dest/bin/${prog#"$build"/}"
		;;
	*) cp -L "$prog" "$dest/bin/" ;;
	esac
	out=$(ldd "$prog") || die "ldd $prog failed"
	if grep -q 'not found' <<<"$out"; then
		die "$prog: missing libraries here: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ')"
	fi
	while read -r soname arrow path _; do
		[ "$arrow" = "=>" ] && [ -f "$path" ] || continue
		[[ $soname =~ $skip ]] && continue
		libs[$soname]=$path
	done <<<"$out"
done
# The client library, for the Python package (ctypes loads it; no program
# links it: rdmamemctl takes the static one).
[ -f "$build/librdmamem.so.0" ] && libs[librdmamem.so.0]=$build/librdmamem.so.0
for soname in "${!libs[@]}"; do
	cp -L "${libs[$soname]}" "$dest/lib/$soname"
done
cp "$root"/proto/*.varlink "$root"/proto/PROTOCOL.md "$root"/proto/errors.[ch] "$dest/src/proto/"
# The Python package as pip installs it (pyproject.toml, README.md: the
# fresh-venv test), its tests, its benchmark, run with the machine's own
# PyTorch, and its API reference (a test compares it with the docstrings).
mkdir -p "$dest/src/python" "$dest/src/tests" "$dest/src/bench"
cp -r "$root/python/rdmamem" "$root/python/tools" "$root/python/pyproject.toml" \
	"$root/python/README.md" "$dest/src/python/"
cp -r "$root/tests/python" "$dest/src/tests/"
cp "$root"/bench/*.py "$dest/src/bench/"
mkdir -p "$dest/src/docs"
cp "$root/docs/python-api.md" "$dest/src/docs/"
find "$dest/src" -name __pycache__ -prune -exec rm -rf {} +
# ... and the shipped files the ops suite reads (the config round trip, the
# units): without them a bundle made outside the device's checkout fails there.
mkdir -p "$dest/src/config" "$dest/src/systemd"
cp "$root"/config/rdmamemd.conf "$dest/src/config/"
cp "$root"/systemd/rdmamemd.service.in "$root"/systemd/rdmamemd.socket \
	"$root"/systemd/rdmamemd.sysusers "$root"/systemd/rdmamemd.tmpfiles "$dest/src/systemd/"

# The test runner looks for the daemon, the CLI and the IDL files at the
# paths it was built with (BUILD_DIR, SRC_DIR); run.sh puts links there when
# those paths are free on the GPU machine.
cat >"$dest/run.sh" <<EOF
#!/bin/sh
# Made by tests/gpu/bundle.sh: runs a bundled program with the bundled libraries.
here=\$(cd "\$(dirname "\$0")" && pwd)
export LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="\$here/bin:\$PATH"
# The Python package: its library, the daemon its tests start, the package.
export RDMAMEM_LIBRARY="\$here/lib/librdmamem.so.0" RDMAMEMD="\$here/bin/rdmamemd"
export PYTHONPATH="\$here/src/python\${PYTHONPATH:+:\$PYTHONPATH}"
link() {
	if [ -L "\$1" ] || [ ! -e "\$1" ]; then
		mkdir -p "\$(dirname "\$1")" && ln -sfn "\$2" "\$1"
	elif [ "\$(cd "\$1" && pwd -P)" != "\$(cd "\$2" && pwd -P)" ]; then
		echo "run.sh: \$1 exists; the tests may use what is there" >&2
	fi
}
link '$root' "\$here/src"
link '$build' "\$here/bin"
[ \$# -gt 0 ] || { echo "usage: \$0 PROGRAM [ARG...]" >&2; exit 2; }
exec "\$@"
EOF
chmod +x "$dest/run.sh"

# `make bench` there: the call-path benchmarks bundled, each against the
# bundled daemon (bench-pipeline finds redis-server on run.sh's PATH).
if [ -x "$dest/bin/bench-pipeline" ]; then
	cat >"$dest/bin/bench-all" <<'EOF'
#!/bin/sh
# Made by tests/gpu/bundle.sh: `make bench`'s call-path benchmarks, run as
# .device/cuda/run.sh bench-all [--seconds N]
here=$(cd "$(dirname "$0")" && pwd)
for b in bench-pipeline bench-ping bench-region; do
	[ -x "$here/$b" ] || continue
	"$here/$b" --daemon "$here/rdmamemd" "$@" || exit
done
EOF
	chmod +x "$dest/bin/bench-all"
fi
# Every GPU check and benchmark in one command (gpu-all.sh says which).
install -m 755 "$root/tests/gpu/gpu-all.sh" "$dest/bin/gpu-all"

{
	echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) from $root"
	echo "commit $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
	echo "build $build"
	find "$dest/bin" "$dest/lib" -type f | sort | while read -r f; do
		echo "$(sha256sum "$f" | cut -c1-16) ${f#"$dest"/}"
	done
} >"$dest/MANIFEST"

echo "bundle.sh: $dest ($(du -sh "$dest" | cut -f1)): $(ls "$dest/bin" | tr '\n' ' ')+ ${#libs[@]} libraries"
