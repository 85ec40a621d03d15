#!/bin/sh
# Every GPU check and benchmark of the project in one command, for the GPU
# machine's scarce device time (tests/gpu/README.md). bundle.sh copies it
# into the bundle as bin/gpu-all; run it there as
#
#   .device/cuda/run.sh gpu-all [STEP...]
#
# STEPs, in the order they run by default:
#   unit          the gpu_unit suite (the fake driver, in the bundle's build)
#   gpu           the gpu suite: real driver, real daemon, child processes
#   smoke         cuda-smoke: cuda.c against the driver, the bare timings
#   python        tests/python, its cuda tests included (PyTorch there)
#   imports       bench-gpu's import rows alone (a daemon that made no copy)
#   bench-gpu     the whole bench-gpu
#   bench-python  bench/bench_python.py
#   bench-all     bench-pipeline, bench-ping, bench-region (1.5 s rows)
#
# Each step's whole output goes to $GPU_ALL_LOGS/STEP.log (/tmp/gpu-all by
# default). Standard output gets each step's status and time, the checks'
# verdicts and the benchmarks' tables. Exits 1 when a step failed; the
# steps after it still run, since a machine may not come back soon.
here=$(cd "$(dirname "$0")/.." && pwd)
logs=${GPU_ALL_LOGS:-/tmp/gpu-all}
daemon=$here/bin/rdmamemd
failed=0

mkdir -p "$logs" && cd "$here/src" || exit 1
steps="unit gpu smoke python imports bench-gpu bench-python bench-all"
# shellcheck disable=SC2086 # the default steps, one word each
[ $# -gt 0 ] || set -- $steps
for s in "$@"; do
	case " $steps " in
	*" $s "*) ;;
	*) echo "gpu-all: no step '$s' ($steps)" >&2 && exit 2 ;;
	esac
done

# step NAME TIMEOUT COMMAND...: runs it, logs it, says how it ended.
step() {
	name=$1 limit=$2
	shift 2
	t0=$(date +%s)
	timeout "$limit" "$@" >"$logs/$name.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || failed=1
	echo "=== $name: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)") in $(($(date +%s) - t0)) s, log $logs/$name.log"
}

# The lines that say how a check suite ended, and each failure.
verdict() {
	grep -E '[0-9]+%: Checks|Passed:|:F:|:E:|SKIP|^(ok|not ok|FAIL)' "$logs/$1.log" |
		grep -vE '^ok' | tail -20
}

# A benchmark's tables, without its empty lines.
tables() {
	grep -vE '^[[:space:]]*$' "$logs/$1.log"
}

for s in "$@"; do
	case $s in
	unit)
		step unit 180 env CK_RUN_SUITE=gpu_unit test-rdmamemd
		verdict unit ;;
	gpu)
		step gpu 300 env CK_RUN_SUITE=gpu test-rdmamemd
		verdict gpu ;;
	smoke)
		step smoke 120 cuda-smoke
		echo "$(grep -c '^ok' "$logs/smoke.log") ok"
		verdict smoke ;;
	python)
		step python 300 python3 -m pytest -q -rs -p no:cacheprovider tests/python
		tail -n 4 "$logs/python.log" ;;
	imports)
		step imports 200 env RDMAMEM_BENCH_GPU_ONLY=imports bench-gpu --daemon "$daemon" --seconds 0.5
		tables imports ;;
	bench-gpu)
		step bench-gpu 400 bench-gpu --daemon "$daemon" --seconds 0.5
		tables bench-gpu ;;
	bench-python)
		step bench-python 240 python3 bench/bench_python.py --daemon "$daemon" \
			--calls "$here/bin/bench-calls"
		tables bench-python ;;
	bench-all)
		step bench-all 300 "$here/bin/bench-all" --seconds 1.5
		tables bench-all ;;
	esac
done
exit $failed
