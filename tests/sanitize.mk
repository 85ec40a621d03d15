# ThreadSanitizer and valgrind runs of the test suite, included by the
# Makefile.
#
#   make tsan            the whole suite (host, fuzz corpus, VM) built with
#                        -fsanitize=thread in build/tsan: the thread-pool
#                        paths (large Read/Write/Copy, MR registration, GPU
#                        imports over the fake driver in the fuzz replay)
#   make check-valgrind  the host suites and the conformance suite with every
#                        daemon they start under valgrind memcheck (no
#                        definite leaks, no errors),
#                        and the fuzz corpus's named inputs (seed-*, crash-*,
#                        hang-*; not the hundreds the fuzzers added, which
#                        make check replays) under it
#
# libtsan2 comes with gcc; valgrind is installed by `make deps`.

DEB_PKGS += valgrind

SAN_tsan := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
ifeq ($(VARIANT),tsan)
SAN := $(SAN_tsan)
endif

VALGRIND ?= valgrind --quiet --error-exitcode=99 --leak-check=full \
	--show-leak-kinds=definite --errors-for-leak-kinds=definite --track-fds=no

.PHONY: tsan check-valgrind

# halt_on_error: a race fails the test that caused it, in the daemon too.
tsan:
	TSAN_OPTIONS=$${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
	$(MAKE) VARIANT=tsan check

# CK_TIMEOUT_MULTIPLIER: valgrind runs the daemon some 20 times slower.
check-valgrind: deps all $(B)/test-rdmamemd $(B)/conformance $(FUZZ_REPLAYS) $(EXAMPLES)
	RDMAMEM_TEST_DAEMON_WRAPPER="$(strip $(VALGRIND))" \
	CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-4} CK_EXCLUDE_TAGS="rdma cuda hosts numa" \
		$(B)/test-rdmamemd
	RDMAMEM_TEST_DAEMON_WRAPPER="$(strip $(VALGRIND))" $(B)/conformance $(CONFORMANCE_ARGS)
	$(Q)for t in $(FUZZ_TARGETS); do \
		$(VALGRIND) $(B)/fuzz-replay-$$t tests/fuzz/corpus/$$t/*-* || exit 1; \
	done
