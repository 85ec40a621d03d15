# rdmamemd — one plain GNU Makefile.
#
#   make deps      install the Debian packages the build and the tests need
#                  (no-op when present)
#   make deps-run  only those the build and the daemon need
#   make           build daemon, client library and CLI into build/release
#   make run       deps-run + build + start the daemon in the foreground
#   make check     deps + build + run every test, the RDMA ones in a VM
#   make check-host  the same without the VM
#   make check-python  the Python package's tests (part of check-host)
#   make format-check  the C sources as .clang-format writes them (part of check)
#   make layering  the #include graph against the layers (tests/layering.py)
#   make idl       write proto/*.varlink from the daemon's interface tables
#   make man3      write docs/man3/ (a page per function) from rdmamem.h
#   make conformance  the Varlink conformance suite alone (reference Go library)
#   make vmtest    only the VM part: RDMA smoke test + tests tagged rdma
#   make vmtest-numa  one VM with two NUMA nodes, a NIC on each: tests tagged numa
#   make vmtest2   the two-VM bed: smoke across hosts + tests tagged hosts
#   make check-clone  check + vmbench in a fresh clone of HEAD under /tmp
#   make installcheck  install into a temporary root and build a client against it
#   make asan      the whole test suite under ASan + UBSan (build/asan)
#   make bench     benchmarks, each beside its anchor
#   make gpu-bundle  binaries + the libraries a GPU machine lacks, for the
#                  device tool (tests/gpu/README.md)
#   make install   PREFIX=/usr/local DESTDIR=
#   make deb       Debian packages into build/deb, lintian, their contents
#
# VARIANT selects the build flavour (release, debug, asan); B the object
# directory, so `make B=/tmp/out` builds out of tree.
# Comments stay on their own lines: a trailing "# ..." leaks spaces into values.

VARIANT    ?= release
B          ?= build/$(VARIANT)
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/vendor-completions
PKG_CONFIG ?= pkg-config
CUDA_HOME  ?= /usr/local/cuda
CC         ?= cc
INSTALL    ?= install
OBJCOPY    ?= objcopy
Q          := $(if $(filter 1,$(V)),,@)

VERSION    := 0.1.0
SOMAJOR    := 0

# Debian packages behind the build and the daemon (DEB_PKGS_RUN: what
# `make run` installs), and beside them those the tests need (DEB_PKGS, which
# the test suites' .mk files add to; `make deps` installs whichever are
# missing). procps: the unit's ExecReload is /bin/kill, which
# systemd-analyze verify wants to find; groff-base: the man pages are linted;
# libc6-dev: gcc only recommends it, and apt here installs no recommends;
# zsh: the cli suite checks that rdmamemctl's zsh completion parses.
DEB_PKGS_RUN := gcc libc6-dev make pkg-config libuv1-dev libcjson-dev libsystemd-dev \
                libibverbs-dev librdmacm-dev ibverbs-providers rdma-core libinih-dev \
                libmicrohttpd-dev
DEB_PKGS     := $(DEB_PKGS_RUN) check systemd procps groff-base zsh
PC_MODULES_RUN := libuv libcjson libsystemd libibverbs librdmacm libmlx5 inih libmicrohttpd
PC_MODULES     := $(PC_MODULES_RUN) check

include tests/vm/vm.mk

SUDO       := $(if $(filter 0,$(shell id -u)),,sudo)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wformat=2 -Wno-format-nonliteral -Wundef \
           -Werror=implicit-function-declaration
CFLAGS  ?= -O2 -g
SAN_asan  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_debug := -O0 -g
SAN     := $(SAN_$(VARIANT))

# pkg-config runs once, when first needed, after `deps` had its chance.
PC_CFLAGS = $(eval PC_CFLAGS := $$(shell $(PKG_CONFIG) --cflags libuv libcjson libsystemd inih))$(PC_CFLAGS)
LIBS_DAEMON = $(eval LIBS_DAEMON := $$(shell $(PKG_CONFIG) --libs libuv libcjson libsystemd libibverbs librdmacm libmlx5 inih libmicrohttpd))$(LIBS_DAEMON)
LIBS_CLIENT = $(eval LIBS_CLIENT := $$(shell $(PKG_CONFIG) --libs libcjson))$(LIBS_CLIENT)
LIBS_VERBS = $(eval LIBS_VERBS := $$(shell $(PKG_CONFIG) --libs libibverbs librdmacm))$(LIBS_VERBS)
LIBS_CHECK = $(eval LIBS_CHECK := $$(shell $(PKG_CONFIG) --libs check))$(LIBS_CHECK)
# daemon/gpu/cuda.c: dlopen() (in libc since glibc 2.34, libdl before) and pthread_once.
LIBS_DL    := -ldl -lpthread

# cuda.h at build time when the toolkit is there; libcuda.so.1 is never
# linked, the daemon opens it with dlopen() when the first GPU import comes.
CUDA_CFLAGS := $(if $(wildcard $(CUDA_HOME)/include/cuda.h),-I$(CUDA_HOME)/include -DHAVE_CUDA_H=1)

ALL_CFLAGS = -std=gnu11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(SAN) -fPIC -fvisibility=hidden -MMD -MP \
             -I. -Iclient/include -Iclient $(PC_CFLAGS) $(CUDA_CFLAGS) \
             -DBUILD_DIR='"$(abspath $(B))"' -DSRC_DIR='"$(CURDIR)"' \
             -DSYSCONFDIR='"$(SYSCONFDIR)"' -DRDMAMEM_PACKAGE_VERSION='"$(VERSION)"'
ALL_LDFLAGS = $(SAN) $(LDFLAGS)

# util/ and proto/: what the daemon and the client share (PROTO_OBJS has
# both), but util's timers, which need libuv: the daemon's alone.
UTIL_UV_SRCS := util/timeout.c util/loop_poll.c
UTIL_SRCS   := $(filter-out $(UTIL_UV_SRCS),$(wildcard util/*.c))
PROTO_SRCS  := $(wildcard proto/*.c)
# daemon/ (daemon.c, main.c) and its layers' folders (tests/layering.py).
DAEMON_SRCS := $(wildcard daemon/*.c daemon/*/*.c) $(UTIL_UV_SRCS)
CLIENT_SRCS := $(wildcard client/*.c)
CTL_SRCS    := $(wildcard client/ctl/*.c)
# tests/unit: suites that link daemon modules and start no daemon;
# tests/e2e: suites that start rdmamemd and talk Varlink to it. One runner
# (tests/main.c) holds both; tests/fakes: the fake verbs and CUDA driver.
TEST_SRCS   := $(wildcard tests/*.c tests/unit/*.c tests/e2e/*.c)
FAKE_SRCS   := $(wildcard tests/fakes/*.c)
BENCH_SRCS  := $(wildcard bench/*.c)
PEER_SRCS   := $(wildcard tests/peer/*.c)
GPU_SRCS    := $(wildcard tests/gpu/*.c)
# examples/: client programs, built against the static library (the public
# one, LIB_A: they call nothing but rdmamem_*).
EXAMPLE_SRCS := $(wildcard examples/*.c)

obj = $(patsubst %.c,$(B)/%.o,$(1))
PROTO_OBJS  := $(call obj,$(UTIL_SRCS) $(PROTO_SRCS))
DAEMON_OBJS := $(call obj,$(DAEMON_SRCS))
CLIENT_OBJS := $(call obj,$(CLIENT_SRCS))
CTL_OBJS    := $(call obj,$(CTL_SRCS))
TEST_OBJS   := $(call obj,$(TEST_SRCS))
FAKE_OBJS   := $(call obj,$(FAKE_SRCS))
BENCH_OBJS  := $(call obj,$(BENCH_SRCS))
GPU_OBJS    := $(call obj,$(GPU_SRCS))
EXAMPLES    := $(patsubst examples/%.c,$(B)/examples/%,$(EXAMPLE_SRCS))
ALL_OBJS    := $(PROTO_OBJS) $(DAEMON_OBJS) $(CLIENT_OBJS) $(CTL_OBJS) $(TEST_OBJS) $(FAKE_OBJS) \
               $(BENCH_OBJS) $(call obj,$(PEER_SRCS)) $(GPU_OBJS) $(call obj,$(EXAMPLE_SRCS))

LIB_SO      := $(B)/librdmamem.so.$(VERSION)
LIB_A       := $(B)/librdmamem.a
LIB_INTERNAL := $(B)/librdmamem-internal.a
BINS        := $(B)/rdmamemd $(B)/rdmamemctl $(LIB_SO) $(LIB_A) $(B)/rdmamem.pc \
               $(B)/rdmamemd.service

.PHONY: all deps deps-run build-deps run check check-host clang-check check-clone installcheck asan bench gpu-bundle \
	format format-check layering man3 man3-check idl install uninstall clean deb
.DEFAULT_GOAL := all

all: $(BINS)

# dpkg knows every package (pkg-config only the libraries); without dpkg
# (not Debian) the pkg-config check says what is missing. Not root and no
# sudo: say what root should run rather than fail on "sudo: not found".
deps:
	$(Q)if ! command -v dpkg-query >/dev/null; then \
		$(PKG_CONFIG) --print-errors --exists $(PC_MODULES) && exit 0; \
		echo "make deps: install the packages above (Debian names: $(DEB_PKGS))"; exit 1; \
	fi; \
	missing=""; \
	for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	[ -z "$$missing" ] && exit 0; \
	if [ -n "$(SUDO)" ] && ! command -v $(SUDO) >/dev/null; then \
		echo "make deps: these Debian packages are missing:$$missing"; \
		echo "make deps: there is no sudo here and you are not root: as root, run"; \
		echo "    apt-get update && apt-get install --no-install-recommends$$missing"; \
		echo "make deps: then run make again (or run this make as root)"; \
		exit 1; \
	fi; \
	echo "make deps: installing$$missing"; \
	$(SUDO) apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing

# What the build and the daemon need, not the test tools (make run).
deps-run:
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS='$(DEB_PKGS_RUN)' PC_MODULES='$(PC_MODULES_RUN)'

# A plain `make` never installs anything: objects wait for `deps` only when
# a goal that installs (run, check and the other test goals) was asked for;
# otherwise `build-deps` only says which libraries are missing.
INSTALLING_GOALS := deps check check-host check-clone asan tsan check-valgrind vmtest vmtest2 vmtest-numa \
                    vmbench vmbench2 vmsystemd conformance fuzz fuzz-replay soak bench installcheck gpu-bundle \
                    format-check layering man3-check check-python deb
BUILD_PREREQ := $(if $(filter $(INSTALLING_GOALS),$(MAKECMDGOALS)),deps,$(if $(filter run deps-run,$(MAKECMDGOALS)),deps-run,build-deps))

build-deps:
	$(Q)$(PKG_CONFIG) --exists $(PC_MODULES_RUN) 2>/dev/null || { \
		$(PKG_CONFIG) --print-errors --exists $(PC_MODULES_RUN); \
		echo "Missing build libraries: \`make deps-run\` installs them (Debian: $(DEB_PKGS_RUN))"; \
		exit 1; }

$(B)/%.o: %.c | $(BUILD_PREREQ)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/rdmamemd: $(DAEMON_OBJS) $(PROTO_OBJS)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_DAEMON) $(LIBS_DL)

$(LIB_SO): $(CLIENT_OBJS) $(PROTO_OBJS) client/librdmamem.map
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -shared -Wl,-soname,librdmamem.so.$(SOMAJOR) \
		-Wl,--version-script=client/librdmamem.map -Wl,-z,defs \
		-o $@ $(CLIENT_OBJS) $(PROTO_OBJS) $(LIBS_CLIENT)
	$(Q)ln -sf librdmamem.so.$(VERSION) $(B)/librdmamem.so.$(SOMAJOR)
	$(Q)ln -sf librdmamem.so.$(SOMAJOR) $(B)/librdmamem.so

# The installed archive defines what the shared library exports (the
# version script's rdmamem_*, not the library's hidden rdmamem__* and
# rdmamem_error_*) and nothing else: its objects are linked into one
# (ld -r) and every other global made local, so that an application's own
# json_parse() or base64_encode() does not clash with ours (cJSON_* stay
# undefined references: pkg-config --static adds -lcjson). The test runner,
# the benchmarks and rdmamemctl call the shared helpers (proto/, util/)
# themselves: they link LIB_INTERNAL, the objects as they are, never
# installed.
$(LIB_A): $(CLIENT_OBJS) $(PROTO_OBJS) $(LIB_SO)
	@echo "  AR      $@"
	$(Q)rm -f $@ $(B)/librdmamem.o
	$(Q)nm -D --defined-only $(LIB_SO) | \
		awk '$$3 ~ /^rdmamem_/ { sub(/@.*/, "", $$3); print $$3 }' > $(B)/librdmamem.syms
	$(Q)$(CC) -r -nostdlib $(LTO_REL) -o $(B)/librdmamem.o $(CLIENT_OBJS) $(PROTO_OBJS)
	$(Q)$(OBJCOPY) --keep-global-symbols=$(B)/librdmamem.syms $(B)/librdmamem.o
	$(Q)$(AR) rcs $@ $(B)/librdmamem.o

# With -flto in CFLAGS (Ubuntu's dpkg-buildflags) the objects carry GCC's
# intermediate code, whose names objcopy cannot hide: the one object is
# then compiled for real (GCC's nolto-rel).
LTO_REL = $(if $(filter -flto%,$(CFLAGS)),$(filter -flto%,$(CFLAGS)) -flinker-output=nolto-rel)

$(LIB_INTERNAL): $(CLIENT_OBJS) $(PROTO_OBJS)
	@echo "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# The files that name install directories are made again when one changes:
# `make && make install PREFIX=/usr` installs a unit that starts
# /usr/sbin/rdmamemd, not the /usr/local one the first make wrote. The
# stamp's date moves only when the directories do.
DIRS_STAMP := $(B)/dirs.stamp
DIRS_TEXT   = PREFIX=$(PREFIX) LIBDIR=$(LIBDIR) INCLUDEDIR=$(INCLUDEDIR) SBINDIR=$(SBINDIR)

$(DIRS_STAMP): FORCE
	$(Q)mkdir -p $(@D)
	$(Q)echo '$(DIRS_TEXT)' | cmp -s - $@ || echo '$(DIRS_TEXT)' > $@

.PHONY: FORCE
FORCE:

# libdir and includedir relative to ${prefix} where they are under it, so
# pkg-config --define-prefix (and a sysroot) can move the tree.
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

$(B)/rdmamem.pc: client/rdmamem.pc.in Makefile $(DIRS_STAMP)
	$(Q)mkdir -p $(@D)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call pc_dir,$(LIBDIR))|' \
		-e 's|@INCLUDEDIR@|$(call pc_dir,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' $< > $@

$(B)/rdmamemd.service: systemd/rdmamemd.service.in Makefile $(DIRS_STAMP)
	$(Q)mkdir -p $(@D)
	$(Q)sed -e 's|@SBINDIR@|$(SBINDIR)|' $< > $@

$(B)/rdmamemctl: $(CTL_OBJS) $(LIB_INTERNAL)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT)

# The test runner links the daemon's modules (not its main) and the client;
# the cuda and region suites the fake driver and verbs (the fuzzers too).
$(B)/test-rdmamemd: $(TEST_OBJS) $(FAKE_OBJS) $(filter-out $(B)/daemon/main.o,$(DAEMON_OBJS)) \
		$(LIB_INTERNAL)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_DAEMON) $(LIBS_CHECK) $(LIBS_DL)

# Programs for a GPU machine: they play the client with the driver API
# itself, so they need cuda.h; `make check` builds them so they keep
# compiling, tests/gpu/bundle.sh carries them there.
GPU_PROGS := $(if $(CUDA_CFLAGS),$(B)/cuda-smoke)

$(B)/cuda-smoke: $(B)/tests/gpu/cuda-smoke.o $(B)/daemon/gpu/cuda.o $(B)/daemon/core/log.o \
		$(B)/util/fdhold.o $(B)/util/sockio.o
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_DL) $(LIBS_DAEMON)

# GPU_BUNDLE: where the bundle goes (bundle.sh's default: .device/cuda in
# the repository's main checkout, the tree the device tool sends).
gpu-bundle: all $(B)/test-rdmamemd $(GPU_PROGS) $(B)/examples/async-uv $(B)/bench-calls \
		$(B)/bench-pipeline $(B)/bench-ping $(B)/bench-region $(if $(CUDA_CFLAGS),$(B)/bench-gpu)
	tests/gpu/bundle.sh -B $(B) $(if $(GPU_BUNDLE),-o $(GPU_BUNDLE))

# A remote peer for the RDMA tests: it uses the verbs itself, as peers do.
# It stays unsanitized: built with ASan, its ConnectQueuePair path stops
# completing work requests on rxe under TCG (the daemon is what asan tests).
$(B)/tests/peer/rdma-peer.o: SAN := $(filter-out -fsanitize=%,$(SAN))
$(B)/examples/%: $(B)/examples/%.o $(LIB_A)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT)

# The libuv example links libuv too.
LIBS_UV = $(eval LIBS_UV := $$(shell $(PKG_CONFIG) --libs libuv))$(LIBS_UV)

$(B)/examples/async-uv: $(B)/examples/async-uv.o $(LIB_A)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT) $(LIBS_UV)

$(B)/rdma-peer: SAN := $(filter-out -fsanitize=%,$(SAN))
$(B)/rdma-peer: $(B)/tests/peer/rdma-peer.o
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT) $(LIBS_VERBS)

# The two-VM bed's programs (tests/vm/vm.mk, make vmtest2): host B's
# remote-control agent, and a client that owns a region and holds it.
$(B)/vm-agent: $(B)/tests/peer/vm-agent.o
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^

$(B)/region-owner: $(B)/tests/peer/region-owner.o $(LIB_A)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT)

$(B)/bench-%: $(B)/bench/bench-%.o $(B)/bench/benchlib.o $(LIB_INTERNAL)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT) $(LIBS_VERBS) $(LIBS_DL) $(LIBS_DAEMON)

# The transfer engine's benchmark runs its logic in process, and a daemon
# of its own over the fake verbs (daemon/ without its main, tests/fakes).
$(B)/bench-remote: $(B)/bench/bench-remote.o $(B)/bench/benchlib.o \
		$(filter-out $(B)/daemon/main.o,$(DAEMON_OBJS)) $(FAKE_OBJS) $(LIB_INTERNAL)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT) $(LIBS_VERBS) $(LIBS_DL) $(LIBS_DAEMON)

# The GPU benchmark plays the client with the driver API, through cuda.c.
$(B)/bench-gpu: $(B)/daemon/gpu/cuda.o $(B)/daemon/core/log.o

run: deps-run all
	$(B)/rdmamemd $(RUN_ARGS)

# The interface files are the daemon's tables printed (daemon/rpc/rpc_idl.c);
# the idl unit suite fails when they differ from what it serves.
IDL_FILES := proto/io.rdmamemd.varlink proto/org.varlink.service.varlink

idl: $(B)/rdmamemd
	$(Q)for f in $(IDL_FILES); do \
		i=$$(basename $$f .varlink); \
		$(B)/rdmamemd --print-idl $$i > $$f.tmp && mv $$f.tmp $$f || { rm -f $$f.tmp; exit 1; }; \
	done

# CK_DEFAULT_TIMEOUT: the end-to-end cases start real daemons. Cases tagged
# "rdma" need an RDMA device: they run in the Soft-RoCE VM (tests/vm/vm.mk);
# "hosts" two hosts: they run in the two-VM bed (make vmtest2); "numa" two
# NUMA nodes with a NIC each: the NUMA VM (make vmtest-numa). check-host
# is everything but the VMs (it builds the bed's programs, which then keep
# compiling).
# The metrics suite lints the metrics text with promtool (prometheus).
DEB_PKGS += prometheus

check-host: deps all $(B)/test-rdmamemd $(B)/rdma-peer $(B)/conformance $(GPU_PROGS) $(VM2_PROGS) \
		$(EXAMPLES)
	$(Q)$(MAKE) --no-print-directory layering format-check man3-check clang-check
	CK_DEFAULT_TIMEOUT=$${CK_DEFAULT_TIMEOUT:-30} CK_EXCLUDE_TAGS="rdma cuda hosts numa" $(B)/test-rdmamemd
	$(B)/conformance $(CONFORMANCE_ARGS)
	$(Q)$(MAKE) --no-print-directory check-python
	$(Q)$(MAKE) --no-print-directory installcheck
	$(Q)$(MAKE) --no-print-directory fuzz-replay

# The package build (make deb) once, in the release build: the sanitizer
# runs of the same suite (make asan, tsan) would build the same packages.
check: check-host
	$(Q)$(if $(filter release,$(VARIANT)),$(MAKE) --no-print-directory deb)
	$(Q)$(MAKE) --no-print-directory vmtest
	$(Q)$(MAKE) --no-print-directory vmtest-numa
	$(Q)$(MAKE) --no-print-directory vmtest2

# What a clean clone does, where many clone: under /tmp (tests/clone-check.sh).
check-clone:
	tests/clone-check.sh

# make install into a temporary root, then what a packager and a user
# would check there (tests/installcheck.sh); before that, make install with
# a PREFIX given late and its ldconfig (tests/install-dirs.sh).
installcheck: all
	$(Q)tests/install-dirs.sh "$(MAKE) --no-print-directory"
	$(Q)root=$$(mktemp -d /tmp/rdmamemd-root.XXXXXX) && \
	$(MAKE) --no-print-directory -s install DESTDIR=$$root >/dev/null && \
	tests/installcheck.sh $$root "$(PREFIX)" "$(LIBDIR)" "$(SYSCONFDIR)" "$(CC)" "$(SAN)"; \
	rc=$$?; rm -rf $$root; exit $$rc

asan:
	ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1} \
	UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	$(MAKE) VARIANT=asan check

BENCHES := $(B)/bench-pipeline $(B)/bench-ping $(B)/bench-region $(B)/bench-remote \
	   $(B)/bench-calls $(B)/bench-metrics

# bench-pipeline's anchor is redis-server, started on a private socket
# (redis-tools: redis-benchmark, its figures printed beside ours).
# bench_python.py: the Python package (its C anchors from bench-calls), with
# the build's librdmamem. bench-instructions.py: the daemon's instructions per
# call under callgrind (valgrind, installed for the checks), beside
# redis-server's.
DEB_PKGS += redis-server redis-tools

bench: deps all $(BENCHES)
	$(B)/bench-pipeline --daemon $(B)/rdmamemd
	$(B)/bench-ping --daemon $(B)/rdmamemd
	$(B)/bench-region --daemon $(B)/rdmamemd
	$(B)/bench-remote --daemon $(B)/rdmamemd
	$(B)/bench-metrics --daemon $(B)/rdmamemd
	RDMAMEM_LIBRARY=$(abspath $(B))/librdmamem.so.$(SOMAJOR) $(PYTHON) bench/bench_python.py \
		--daemon $(B)/rdmamemd --calls $(B)/bench-calls
	$(PYTHON) bench/bench-instructions.py --daemon $(B)/rdmamemd --calls $(B)/bench-calls

# The C sources as .clang-format (clang-format 14, Debian 12's) writes them:
# format-check fails on any difference, format rewrites them.
DEB_PKGS    += clang-format
FORMAT_SRCS  = $(shell git ls-files '*.c' '*.h' 2>/dev/null || \
                 find . -name '*.[ch]' -not -path './build/*')

format-check: deps
	$(Q)clang-format --dry-run --Werror $(FORMAT_SRCS)

format:
	$(Q)clang-format -i $(FORMAT_SRCS)

# The fuzz build compiles with clang, which warns where gcc does not (a
# cleanup variable nobody reads, for one): clang-check runs clang over every
# C source with the build's own flags, checking only (no objects), so that
# a change gcc accepts cannot break `make fuzz`. tests/gpu/ needs cuda.h, as
# its build does.
CLANG_CHECK_SRCS = $(UTIL_SRCS) $(PROTO_SRCS) $(DAEMON_SRCS) $(CLIENT_SRCS) $(CTL_SRCS) \
                   $(TEST_SRCS) $(FAKE_SRCS) $(BENCH_SRCS) $(PEER_SRCS) \
                   $(if $(CUDA_CFLAGS),$(GPU_SRCS)) \
                   $(EXAMPLE_SRCS) $(wildcard tests/fuzz/*.c)

clang-check: deps
	$(Q)printf '%s\n' $(CLANG_CHECK_SRCS) | xargs -P $$(nproc) -n 8 \
		clang -fsyntax-only $(filter-out -MMD -MP,$(ALL_CFLAGS))

# The #include graph of daemon/, util/, proto/ and client/ against the layers
# written at the top of tests/layering.py: no include into a higher layer or
# a sibling, no cycle but the transport loop. None is left: a
# tests/layering-known.txt (absent now) would list those tolerated.
DEB_PKGS += python3

layering: deps
	$(Q)python3 tests/layering.py

# Section 3 has a page per function (a page and ".so" pages for a group
# that shares one comment), written from rdmamem.h's comments by
# docs/genman3.py: `make man3` writes docs/man3/ after the header changed,
# man3-check (part of check-host) fails when a page differs from what it
# would write, or a function has no summary there.
MAN3_PAGES := $(wildcard docs/man3/rdmamem_*.3)

man3:
	$(Q)python3 docs/genman3.py

man3-check: deps
	$(Q)python3 docs/genman3.py --check

# Debian packages (debian/): dpkg-buildpackage -us -uc -b in a copy of the
# tree under build/deb, where the .deb files land, then lintian and what each
# package holds (tests/deb-check.sh). dpkg-buildpackage checks for
# build-essential whatever Build-Depends says (a fresh Debian root lacks it).
DEB_PKGS += build-essential debhelper dpkg-dev lintian dh-python pybuild-plugin-pyproject \
	    python3-all

deb: deps
	tests/deb-check.sh $(VERSION)

# An operator's edited configuration is never overwritten.
install: all
	$(INSTALL) -Dm755 $(B)/rdmamemd $(DESTDIR)$(SBINDIR)/rdmamemd
	$(INSTALL) -Dm755 $(B)/rdmamemctl $(DESTDIR)$(BINDIR)/rdmamemctl
	$(INSTALL) -Dm755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/librdmamem.so.$(VERSION)
	ln -sf librdmamem.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librdmamem.so.$(SOMAJOR)
	ln -sf librdmamem.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/librdmamem.so
	$(INSTALL) -Dm644 $(LIB_A) $(DESTDIR)$(LIBDIR)/librdmamem.a
	$(INSTALL) -Dm644 client/include/rdmamem.h $(DESTDIR)$(INCLUDEDIR)/rdmamem.h
	$(INSTALL) -Dm644 $(B)/rdmamem.pc $(DESTDIR)$(LIBDIR)/pkgconfig/rdmamem.pc
	$(INSTALL) -Dm644 $(B)/rdmamemd.service $(DESTDIR)$(UNITDIR)/rdmamemd.service
	$(INSTALL) -Dm644 systemd/rdmamemd.socket $(DESTDIR)$(UNITDIR)/rdmamemd.socket
	$(INSTALL) -Dm644 systemd/rdmamemd.sysusers $(DESTDIR)$(SYSUSERSDIR)/rdmamemd.conf
	$(INSTALL) -Dm644 systemd/rdmamemd.tmpfiles $(DESTDIR)$(TMPFILESDIR)/rdmamemd.conf
	$(INSTALL) -Dm644 docs/rdmamemd.8 $(DESTDIR)$(MANDIR)/man8/rdmamemd.8
	$(INSTALL) -Dm644 docs/rdmamemctl.1 $(DESTDIR)$(MANDIR)/man1/rdmamemctl.1
	$(INSTALL) -Dm644 docs/rdmamem.3 $(DESTDIR)$(MANDIR)/man3/rdmamem.3
	$(INSTALL) -Dm644 shell-completion/bash/rdmamemctl $(DESTDIR)$(BASHCOMPDIR)/rdmamemctl
	$(INSTALL) -Dm644 shell-completion/zsh/_rdmamemctl $(DESTDIR)$(ZSHCOMPDIR)/_rdmamemctl
	$(INSTALL) -Dm644 -t $(DESTDIR)$(MANDIR)/man3 $(MAN3_PAGES)
	[ -e $(DESTDIR)$(SYSCONFDIR)/rdmamemd/rdmamemd.conf ] || \
		$(INSTALL) -Dm644 config/rdmamemd.conf $(DESTDIR)$(SYSCONFDIR)/rdmamemd/rdmamemd.conf
	$(Q)$(install_ldconfig)

# A library installed into the live system is unknown to the dynamic linker
# until ldconfig rebuilds its cache (and makes the soname link): a program
# linked with -lrdmamem would fail to load. Into a DESTDIR, or as a user who
# cannot write the cache, that is the package's or the admin's step.
LDCONFIG ?= ldconfig
define install_ldconfig
if [ -n "$(DESTDIR)" ]; then \
	echo "install: ldconfig skipped (DESTDIR is set: run it on the target)"; \
elif [ "$$(id -u)" != 0 ]; then \
	echo "install: ldconfig skipped (not root): run ldconfig as root before using librdmamem"; \
else \
	echo "install: $(LDCONFIG)"; $(LDCONFIG) && \
	{ $(LDCONFIG) -p | grep -q " => $(LIBDIR)/librdmamem.so.$(SOMAJOR)\$$" || \
	  echo "install: $(LIBDIR) is not in the dynamic linker's path: add it to /etc/ld.so.conf.d/"; }; \
fi
endef

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/rdmamemd $(DESTDIR)$(BINDIR)/rdmamemctl \
		$(DESTDIR)$(LIBDIR)/librdmamem.so* $(DESTDIR)$(LIBDIR)/librdmamem.a \
		$(DESTDIR)$(INCLUDEDIR)/rdmamem.h $(DESTDIR)$(LIBDIR)/pkgconfig/rdmamem.pc \
		$(DESTDIR)$(UNITDIR)/rdmamemd.service $(DESTDIR)$(UNITDIR)/rdmamemd.socket \
		$(DESTDIR)$(SYSUSERSDIR)/rdmamemd.conf $(DESTDIR)$(TMPFILESDIR)/rdmamemd.conf \
		$(DESTDIR)$(MANDIR)/man8/rdmamemd.8 $(DESTDIR)$(MANDIR)/man1/rdmamemctl.1 \
		$(DESTDIR)$(MANDIR)/man3/rdmamem.3 $(DESTDIR)$(BASHCOMPDIR)/rdmamemctl \
		$(DESTDIR)$(ZSHCOMPDIR)/_rdmamemctl \
		$(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3_PAGES)))

clean:
	rm -rf build

include tests/fuzz/fuzz.mk
include tests/conformance/conformance.mk
include tests/soak/soak.mk
include tests/sanitize.mk
include tests/python/python.mk

-include $(ALL_OBJS:.o=.d)
