# Varlink conformance against the reference Go library, included by the
# Makefile (tests/conformance/main.go says what it checks).
#
#   make conformance   build the daemon and run the suite alone (a second or
#                      two); `make check` runs it after the C suites, and
#                      `make vmtest` once more on Soft-RoCE with -require-rdma
#
# Debian's golang-go and golang-github-varlink-go-dev (make deps) are all it
# needs: GOPATH mode over /usr/share/gocode, where the library's package
# lives, so no module proxy and no network are involved. The build cache
# lives in the object directory and GOENV is off, so root and other users
# build alike and nothing is written to $HOME. CGO_ENABLED=0 makes a static
# binary, which the VM runs as it is.

DEB_PKGS += golang-go golang-github-varlink-go-dev

GO       ?= go
GO_ENV    = GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$(abspath $(B))/go-cache \
            GOENV=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
CONFORMANCE_SRCS := $(wildcard tests/conformance/*.go)
# The daemon and the interface files it is held against.
CONFORMANCE_ARGS  = -daemon $(abspath $(B)/rdmamemd) -proto $(CURDIR)/proto

.PHONY: conformance

$(B)/conformance: $(CONFORMANCE_SRCS) | $(BUILD_PREREQ)
	@mkdir -p $(@D)
	@echo "  GO      $@"
	$(Q)cd tests/conformance && $(GO_ENV) $(GO) build -trimpath -o $(abspath $@) .

conformance: deps all $(B)/conformance
	$(B)/conformance $(CONFORMANCE_ARGS)
