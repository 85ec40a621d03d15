# Soft-RoCE test VM, included by the Makefile: real RDMA (rdma_rxe) on Debian's
# stock kernel inside qemu, because the build machines have neither RDMA
# hardware nor kernel InfiniBand support (tests/vm/README.md has the facts
# the scripts rely on).
#
#   make vmtest    smoke-test the VM's RDMA stack, then run the test cases
#                  tagged "rdma" inside it (`make check` runs it)
#   make vmtest2   two VMs, hosts A and B, each with its own rdmamemd and
#                  two rxe devices: smoke-test RDMA across them, then run
#                  the cases tagged "hosts" on A, which drive B through its
#                  agent (`make check` ends with this)
#   make vmtest-numa  one VM with two NUMA nodes and a NIC on each: the
#                  cases tagged "numa" (the device nearest the memory
#                  carries small transfers; `make check` runs it)
#
# VM_DIR holds the kernel cache, the initramfs and the consoles; it is shared
# by every VARIANT, so run one VM target at a time.

DEB_PKGS   += qemu-system-x86 busybox-static iproute2 rdma-core ibverbs-utils \
              rdmacm-utils perftest kmod cpio
VM_DIR     ?= build/vm
VM_TIMEOUT ?= 600

# Copied into the VM at their host paths: the tests find them through BUILD_DIR.
VM_FILES   := $(abspath $(B)/test-rdmamemd $(B)/rdmamemd $(B)/rdmamemctl $(B)/rdma-peer \
              $(B)/conformance $(B)/examples/remote-copy proto/io.rdmamemd.varlink \
              proto/org.varlink.service.varlink)
# The Python package, its RDMA tests and librdmamem, for the VM's pytest run
# (run-vm.sh --python brings python3 and pytest).
VM_PY_FILES := $(abspath $(B)/librdmamem.so.0 $(wildcard python/rdmamem/*.py) \
              tests/python/conftest.py tests/python/daemonproc.py tests/python/test_rdma.py)
VM_PYTEST   := RDMAMEM_BUILD=$(abspath $(B)) python3 -m pytest -q -rs -p no:cacheprovider \
              tests/python/test_rdma.py
# A sanitizer build's librdmamem cannot be loaded into an uninstrumented
# Python (as check-python says): there the VM says so instead. Deferred: SAN
# comes from the variant.
VM_PYTHON = $(if $(filter -fsanitize=%,$(SAN)),echo 'vmtest: tests/python/test_rdma.py skipped \
	in the $(VARIANT) build: Python cannot load an instrumented librdmamem',$(VM_PYTEST))
# Host settings that narrow or tune the test run travel into the VM.
VM_ENV     := $(foreach v,CK_RUN_SUITE CK_RUN_CASE CK_VERBOSITY ASAN_OPTIONS UBSAN_OPTIONS \
              TSAN_OPTIONS,\
              $(if $($(v)),$(v)='$($(v))'))

.PHONY: vmtest vmtest2 vmtest-numa vmbench vmbench2

# The Varlink conformance suite's cases that need a device (ConnectQueuePair,
# registrations in force): all of it, with -require-rdma, unless the run is
# narrowed to some C suites or cases. Deferred (=): CONFORMANCE_ARGS is
# defined by conformance.mk, included after this file.
VM_CONFORMANCE = $(if $(CK_RUN_SUITE)$(CK_RUN_CASE),,conformance -require-rdma $(CONFORMANCE_ARGS) &&)

# TCG emulation is slow: the cases get 120 s each instead of the host's 30.
vmtest: deps all $(B)/test-rdmamemd $(B)/rdma-peer $(B)/conformance $(B)/examples/remote-copy
	$(Q)tests/vm/run-vm.sh --python --build-dir $(VM_DIR) --timeout $(VM_TIMEOUT) \
		--path $(abspath $(B)) $(addprefix --add ,$(VM_FILES) $(VM_PY_FILES)) \
		--cmd "/vmtest/smoke.sh && $(VM_CONFORMANCE) $(strip $(VM_ENV)) CK_DEFAULT_TIMEOUT=120 CK_INCLUDE_TAGS=rdma test-rdmamemd && $(VM_PYTHON)"

# Two NUMA nodes, a NIC on each (run-vm.sh --numa): the cases tagged
# "numa" (tests/e2e/check_numa_vm.c) against the guest's own sysfs.
vmtest-numa: deps all $(B)/test-rdmamemd
	$(Q)tests/vm/run-vm.sh --numa --build-dir $(VM_DIR) --timeout $(VM_TIMEOUT) \
		--path $(abspath $(B)) $(addprefix --add ,$(abspath $(B)/test-rdmamemd $(B)/rdmamemd)) \
		--cmd "$(strip $(VM_ENV)) CK_DEFAULT_TIMEOUT=120 CK_INCLUDE_TAGS=numa test-rdmamemd"

# The two-VM bed: host B's agent and the region holder it runs, beside
# what vmtest carries. B's command is its agent; A's /init tells it to quit
# once A's command is done. Both start their own rdmamemd first
# (tests/vm/hostd.sh). The whole run is bounded by VM2_TIMEOUT, the agent's
# lifetime by 30 s less, so that B says itself that A never told it to quit.
VM2_PROGS   = $(B)/vm-agent $(B)/region-owner
VM2_FILES   = $(filter-out %/conformance,$(VM_FILES)) $(abspath $(VM2_PROGS))
VM2_TIMEOUT ?= 420

VM2_RUN     = tests/vm/run-vm.sh --hosts 2 --build-dir $(VM_DIR) --timeout $(VM2_TIMEOUT) \
              --path $(abspath $(B)) \
              --cmd-b '/vmtest/hostd.sh start && exec vm-agent --listen "$$RDMAMEM_AGENT_LISTEN" --lifetime $$(($(VM2_TIMEOUT) - 30))'

vmtest2: deps all $(B)/test-rdmamemd $(B)/rdma-peer $(B)/examples/remote-copy $(VM2_PROGS)
	$(Q)$(VM2_RUN) $(addprefix --add ,$(VM2_FILES)) \
		--cmd "/vmtest/hostd.sh start && /vmtest/smoke.sh && $(strip $(VM_ENV)) CK_DEFAULT_TIMEOUT=120 CK_INCLUDE_TAGS=hosts test-rdmamemd"

# perftest between the two VMs on rxe0 (tests/vm/perftest.sh), then the
# daemon's Transfer between the same devices beside it, with ratios
# (tests/vm/transferbench.sh, bench/bench-transfer.c). Not part of make
# check. PERFTEST_SIZES narrows the sizes (bytes, space separated);
# HOSTD_ARGS gives host A's rdmamemd more options (--link-ack-timeout=14).
vmbench2: deps all $(VM2_PROGS) $(B)/bench-transfer
	$(Q)$(VM2_RUN) $(addprefix --add ,$(abspath $(B)/rdmamemd $(B)/rdmamemctl $(VM2_PROGS) $(B)/bench-transfer)) \
		--cmd "$(if $(HOSTD_ARGS),RDMAMEM_HOSTD_ARGS='$(HOSTD_ARGS)') /vmtest/hostd.sh start && $(if $(PERFTEST_SIZES),export PERFTEST_SIZES='$(PERFTEST_SIZES)' &&) \
			{ /vmtest/perftest.sh >/tmp/perftest.out; rc=\$$?; cat /tmp/perftest.out; [ \$$rc = 0 ]; } && \
			/vmtest/transferbench.sh /tmp/perftest.out"

# Registration through the daemon beside bare ibv_reg_mr, and Ping during a
# large registration, on Soft-RoCE: function, not performance.
vmbench: deps all $(B)/bench-rdma
	$(Q)tests/vm/run-vm.sh --build-dir $(VM_DIR) --timeout $(VM_TIMEOUT) \
		--path $(abspath $(B)) $(addprefix --add ,$(abspath $(B)/rdmamemd $(B)/bench-rdma)) \
		--cmd "bench-rdma --daemon $(abspath $(B)/rdmamemd)"

# The hardened units under a real systemd: a Debian 12 root file system with
# systemd as PID 1, booted with the kernel above, rdmamemd installed in it by
# its Debian packages (make deb: dpkg -i in the running guest, so the
# maintainer scripts create the user and the runtime directory and start
# the socket), or with VMSYSTEMD_FROM=install by make install PREFIX=/usr
# from its own object directory (the unit and .pc files have PREFIX baked
# in). Slow (minutes), needs root and the Debian archive the first time (the
# root file system is cached in VM_DIR/systemd): run by hand, not part of
# `make check`. tests/vm/systemd/run.sh says what it checks.
VMSYSTEMD_B    ?= build/vm-usr
VMSYSTEMD_FROM ?= deb
vmsystemd_deb   = $(filter deb,$(VMSYSTEMD_FROM))

.PHONY: vmsystemd
vmsystemd: deps $(if $(vmsystemd_deb),deb)
	$(Q)$(if $(vmsystemd_deb),:,$(MAKE) --no-print-directory B=$(VMSYSTEMD_B) PREFIX=/usr all)
	$(Q)tests/vm/systemd/run.sh $(if $(vmsystemd_deb),--debs build/deb,--objdir $(VMSYSTEMD_B)) \
		--kernel-dir $(VM_DIR) --build-dir $(VM_DIR)/systemd --timeout 900
