# Fuzzing, included by the Makefile (tests/fuzz/fuzz.h says what a target is).
#
#   make fuzz         build the libFuzzer targets with clang into build/fuzz
#                     and run each for FUZZ_SECONDS (default 60) in
#                     FUZZ_JOBS processes side by side (default 1; a night
#                     run gives it the machine's cores: one process of the
#                     daemon target makes 200-300 executions a second, each
#                     input being about 1200 system calls); new inputs
#                     go to build/fuzz/corpus/TARGET, crashers to
#                     build/fuzz/crash-*; copy those into
#                     tests/fuzz/corpus/TARGET under a name that says what
#                     they broke (crash-*, hang-*) to keep them, and fold
#                     new coverage in with
#                     build/fuzz/fuzz-TARGET -merge=1 tests/fuzz/corpus/TARGET build/fuzz/corpus/TARGET
#   make fuzz-replay  replay tests/fuzz/corpus/TARGET/* through each target,
#                     built with $(CC) and fuzz-main.c (`make check` does)
#
# VARIANT=fuzz is the libFuzzer build: objects get coverage instrumentation
# (-fsanitize=fuzzer-no-link), the targets link libFuzzer's main.

DEB_PKGS     += clang libclang-rt-14-dev
FUZZ_TARGETS := frame request daemon descriptor
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 1
FUZZ_CC      ?= clang

SAN_fuzz := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=all
ifeq ($(VARIANT),fuzz)
SAN := $(SAN_fuzz)
endif

# What each target links beyond its own file: the frame and request targets
# only the protocol code; the daemon and descriptor targets the daemon
# without its main(), the fakes (tests/fakes, which the test runner links
# too) and the protocol code.
FUZZ_DAEMON_OBJS := $(filter-out $(B)/daemon/main.o,$(DAEMON_OBJS)) $(FAKE_OBJS)
FUZZ_LIBS_daemon  = $(LIBS_DAEMON) $(LIBS_DL)
FUZZ_LIBS_frame   = $(LIBS_CLIENT)
FUZZ_LIBS_request = $(LIBS_CLIENT)
FUZZ_EXTRA_daemon := $(FUZZ_DAEMON_OBJS)
FUZZ_LIBS_descriptor = $(FUZZ_LIBS_daemon)
FUZZ_EXTRA_descriptor := $(FUZZ_DAEMON_OBJS)

FUZZ_OBJS    := $(call obj,$(wildcard tests/fuzz/*.c))
FUZZ_REPLAYS := $(addprefix $(B)/fuzz-replay-,$(FUZZ_TARGETS))

.PHONY: fuzz fuzz-run fuzz-replay
# Pattern rules would delete them as intermediates.
.SECONDARY: $(FUZZ_OBJS)

$(B)/fuzz-replay-%: $(B)/tests/fuzz/fuzz-%.o $(B)/tests/fuzz/fuzz-main.o $(PROTO_OBJS) \
		$(FUZZ_DAEMON_OBJS)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(B)/tests/fuzz/fuzz-main.o $(FUZZ_EXTRA_$*) \
		$(PROTO_OBJS) $(FUZZ_LIBS_$*)

fuzz-replay: deps $(FUZZ_REPLAYS)
	$(Q)for t in $(FUZZ_TARGETS); do \
		$(B)/fuzz-replay-$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# libFuzzer's main instead of fuzz-main.c.
$(B)/fuzz-%: $(B)/tests/fuzz/fuzz-%.o $(PROTO_OBJS) $(FUZZ_DAEMON_OBJS)
	@echo "  LD      $@"
	$(Q)$(CC) $(filter-out -fsanitize=fuzzer-no-link%,$(ALL_LDFLAGS)) \
		-fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_EXTRA_$*) $(PROTO_OBJS) \
		$(FUZZ_LIBS_$*)

fuzz: deps
	$(Q)$(MAKE) --no-print-directory VARIANT=fuzz CC=$(FUZZ_CC) fuzz-run

# -max_len: a few messages each, enough for every method. Each target
# starts from the kept corpus and adds to its own working copy, shared by
# its FUZZ_JOBS processes (libFuzzer's -jobs and -workers: each logs to
# fuzz-N.log in the target's jobs folder and prints its final stats there;
# the sum of their rates is the target's). A job that finds a crash leaves
# an artifact: the run fails when there are more than before it.
# -print_funcs=0: naming new functions starts a symbolizer on pipes in
# the middle of the run.
fuzz-run: $(addprefix $(B)/fuzz-,$(FUZZ_TARGETS))
	$(Q)for t in $(FUZZ_TARGETS); do \
		jobs=$(B)/jobs-$$t; mkdir -p $(B)/corpus/$$t $$jobs; rm -f $$jobs/fuzz-*.log; \
		before=$$(ls $(B)/crash-$$t-* 2>/dev/null | wc -l); \
		echo "  FUZZ    $$t for $(FUZZ_SECONDS)s in $(FUZZ_JOBS) process(es) (logs: $$jobs)"; \
		(cd $$jobs && ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
		   UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		   $(abspath $(B))/fuzz-$$t -jobs=$(FUZZ_JOBS) -workers=$(FUZZ_JOBS) \
			-max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=20 -print_funcs=0 \
			-print_final_stats=1 -artifact_prefix=$(abspath $(B))/crash-$$t- \
			$(abspath $(B))/corpus/$$t $(abspath tests/fuzz/corpus)/$$t > fuzz.log 2>&1); \
		after=$$(ls $(B)/crash-$$t-* 2>/dev/null | wc -l); \
		if [ "$$after" -gt "$$before" ] || ! ls $$jobs/fuzz-*.log >/dev/null 2>&1; then \
			for l in $$jobs/fuzz.log $$jobs/fuzz-*.log; do \
				grep -q -E 'ERROR|deadly signal|ABORTING' $$l 2>/dev/null && tail -n 60 $$l; \
			done; \
			echo "  FUZZ    $$t: $$((after - before)) new artifact(s) in $(B)/crash-$$t-*"; exit 1; \
		fi; \
		awk '/^stat::number_of_executed_units/ { n += $$2; p++ } \
		     /^stat::average_exec_per_sec/ { r += $$2 } \
		     /^stat::peak_rss_mb/ { if ($$2 > m) m = $$2 } \
		     /^stat::new_units_added/ { u += $$2 } \
		     END { printf "          %d process(es): %d executions, %d a second, %d new units, peak RSS %d MB\n", p, n, r, u, m }' \
			$$jobs/fuzz-*.log; \
	done

-include $(patsubst %.c,$(B)/%.d,$(wildcard tests/fuzz/*.c))
