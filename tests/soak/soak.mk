# Soak test, included by the Makefile.
#
#   make soak      SOAK_CLIENTS (default 8) client processes call every
#                  method of a fresh daemon in a random mix for SOAK_SECONDS
#                  (default 60); the daemon's RSS, fds, memfd mappings,
#                  regions and pinned bytes are printed at start, peak and
#                  end, and must come back to their start values (RSS within
#                  SOAK_RSS_SLACK_MIB, what the allocator may keep)

SOAK_CLIENTS       ?= 8
SOAK_SECONDS       ?= 60
SOAK_RSS_SLACK_MIB ?= 8

.PHONY: soak

$(B)/soak: $(B)/tests/soak/soak.o $(LIB_A)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS_CLIENT)

soak: deps all $(B)/soak
	$(B)/soak --daemon $(B)/rdmamemd --clients $(SOAK_CLIENTS) --seconds $(SOAK_SECONDS) \
		--rss-slack-mib $(SOAK_RSS_SLACK_MIB)

-include $(B)/tests/soak/soak.d
