# Soft-RoCE test VM, included by the Makefile: real RDMA (rdma_rxe) on Debian's
# stock kernel inside qemu, because the build machines have neither RDMA
# hardware nor kernel InfiniBand support (DESIGN.md, "Facts measured").
#
#   make vmtest    smoke-test the VM's RDMA stack, then run the test cases
#                  tagged "rdma" inside it (`make check` ends with this)
#
# VM_DIR holds the kernel cache, the initramfs and console.log; it is shared
# by every VARIANT, so run one vmtest at a time.

DEB_PKGS   += qemu-system-x86 busybox-static iproute2 rdma-core ibverbs-utils \
              rdmacm-utils kmod cpio
VM_DIR     ?= build/vm
VM_TIMEOUT ?= 600

# Copied into the VM at their host paths: the tests find them through BUILD_DIR.
VM_FILES   := $(abspath $(B)/test-rdmamemd $(B)/rdmamemd $(B)/rdmamemctl $(B)/rdma-peer)
# Host settings that narrow or tune the test run travel into the VM.
VM_ENV     := $(foreach v,CK_RUN_SUITE CK_RUN_CASE CK_VERBOSITY ASAN_OPTIONS UBSAN_OPTIONS,\
              $(if $($(v)),$(v)='$($(v))'))

.PHONY: vmtest vmbench

# TCG emulation is slow: the cases get 120 s each instead of the host's 30.
vmtest: deps all $(B)/test-rdmamemd $(B)/rdma-peer
	$(Q)tests/vm/run-vm.sh --build-dir $(VM_DIR) --timeout $(VM_TIMEOUT) \
		--path $(abspath $(B)) $(addprefix --add ,$(VM_FILES)) \
		--cmd "/vmtest/smoke.sh && $(strip $(VM_ENV)) CK_DEFAULT_TIMEOUT=120 CK_INCLUDE_TAGS=rdma test-rdmamemd"

# Registration through the daemon beside bare ibv_reg_mr, and Ping during a
# large registration, on Soft-RoCE: function, not performance.
vmbench: deps all $(B)/bench-rdma
	$(Q)tests/vm/run-vm.sh --build-dir $(VM_DIR) --timeout $(VM_TIMEOUT) \
		--path $(abspath $(B)) $(addprefix --add ,$(abspath $(B)/rdmamemd $(B)/bench-rdma)) \
		--cmd "bench-rdma --daemon $(abspath $(B)/rdmamemd)"
