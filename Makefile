# cfsprobe's interface: build, test, lint, bench, demo.
# Every target installs what it needs on a fresh Debian machine.

SHELL := /bin/bash
GO ?= go
BIN := bin/cfsprobe
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/cfsprobe/cfsprobe/internal/lab.Version=$(VERSION)
# Debian packages the tests use: sysbench (external-command tests), and
# qemu + a stock kernel + busybox + cpio (cgroup v2 guest), chromium (report
# tests and make screenshot), tmux (cfsprobe top in a real terminal).
APT_PACKAGES := sysbench qemu-system-x86 linux-image-amd64 busybox-static cpio chromium tmux
GOSRC := $(shell find . -name '*.go' -not -path './bin/*' 2>/dev/null) go.mod go.sum

.PHONY: all build deps test test-unit test-v2 lint fuzz bench demo screenshot clean

all: build

build: $(BIN)

$(BIN): $(GOSRC)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/cfsprobe

# deps installs missing Debian packages (needs root) and Go modules.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	$(GO) mod download

# test runs every test: lint, unit and integration tests on this host's
# cgroups (with the race detector), brief fuzzing of every parser, and the
# cgroup v2 tests in a qemu guest.
test: deps lint test-unit fuzz test-v2

# -p 1: packages one at a time, so that timing-sensitive tests on real
# cgroups never compete with each other for this machine's CPUs.
test-unit:
	$(GO) test -race -p 1 -count=1 -timeout 30m ./...

lint:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Each parser's fuzz target runs briefly here; bench/ runs them long.
FUZZTIME ?= 5s
fuzz:
	@set -e; log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; \
			if ! $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1; then \
				tail -30 $$log; \
				echo "fuzz $$f failed; running it once more (a crash found is saved under testdata/fuzz and fails again)"; \
				$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1 || { tail -50 $$log; exit 1; }; \
			fi; \
		done; \
	done

test-v2: deps
	./test/vm/run.sh

demo: deps build
	./scripts/demo.sh

bench: deps build
	./bench/run.sh

# screenshot renders the sample report (internal/report's suite fixtures)
# in headless Chromium, offline, and saves the full page as docs/report.png.
# It fails rather than skips when Chromium is missing.
# SCREENSHOT_TRACES=DIR renders the traces of DIR (a suite's --out) instead.
SCREENSHOT_TRACES ?=
screenshot: deps
	CFSPROBE_REQUIRE_CGROUPS=1 $(GO) test -count=1 -run '^TestScreenshot$$' ./internal/report -args \
		-screenshot=$(CURDIR)/docs/report.png $(if $(SCREENSHOT_TRACES),-screenshot-traces=$(abspath $(SCREENSHOT_TRACES)))

clean:
	rm -rf bin build
