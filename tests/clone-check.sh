#!/bin/bash
# The clean-clone check: clones this checkout's HEAD into a fresh directory
# under /tmp — where many people and CI systems clone — and runs there
#
#   make check     every test, the RDMA ones in the Soft-RoCE VM
#   make vmbench   the RDMA benchmarks in the same VM
#
#   tests/clone-check.sh [--keep] [MAKE ARGUMENTS...]
#
# Only committed work is in the clone (uncommitted changes are named and
# left out). The VM's build directory (kernel cache, initramfs, console.log)
# is this checkout's, VM_DIR or build/vm, so the kernel is downloaded once
# for both. The clone is removed afterwards unless --keep is given or a step
# failed (its path is printed then). `make check-clone` runs this; .ci/run
# does.
set -eu -o pipefail

die() {
	echo "clone-check.sh: FAILED: $*" >&2
	exit 1
}

keep=false
if [ "${1-}" = --keep ]; then
	keep=true
	shift
fi
src=$(cd "$(dirname "$0")/.." && pwd)
head=$(git -C "$src" rev-parse HEAD) || die "$src is not a git checkout"
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
	echo "clone-check.sh: uncommitted changes in $src are not in the clone:"
	git -C "$src" status --short --untracked-files=no | sed 's/^/  /'
fi

clone=$(mktemp -d /tmp/rdmamemd-clone.XXXXXX)
case $clone in
/tmp/*) ;;
*) die "mktemp gave $clone, not a directory under /tmp" ;;
esac
git clone --quiet "$src" "$clone"
git -C "$clone" checkout --quiet --detach "$head"
# The VM's kernel is a few hundred MB unpacked: one cache for both.
vm_dir=${VM_DIR:-build/vm}
case $vm_dir in
/*) ;;
*) vm_dir=$src/$vm_dir ;;
esac
echo "clone-check.sh: $head cloned into $clone (VM_DIR $vm_dir)"

t0=$(date +%s)
for target in check vmbench; do
	echo "clone-check.sh: make $target in $clone"
	if ! make -C "$clone" --no-print-directory "$target" VM_DIR="$vm_dir" "$@"; then
		die "make $target in the clone under /tmp (kept: $clone)"
	fi
done
echo "clone-check.sh: make check and make vmbench passed in $clone ($(($(date +%s) - t0)) s)"
if $keep; then
	echo "clone-check.sh: kept $clone"
else
	rm -rf "$clone"
fi
