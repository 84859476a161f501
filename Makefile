# cfsprobe's interface: build, test, lint, bench, demo.
# Every target installs what it needs on a fresh Debian machine.

SHELL := /bin/bash
GO ?= go
BIN := bin/cfsprobe
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
VERSION_STAMP := build/version
LDFLAGS := -s -w -X github.com/cfsprobe/cfsprobe/internal/lab.Version=$(VERSION)
# Debian packages the tests use: sysbench (external-command tests), and
# qemu + a stock kernel + busybox + cpio (cgroup v2 guest), chromium (report
# tests and make screenshot), tmux (cfsprobe top in a real terminal), gcc,
# g++ and libc6-dev (the cpuview preload library and its C/C++ tests), nginx
# (worker_processes auto under the CPU view), docker.io (make image and the
# tests on a private dockerd; busybox-static is the debug image's shell) and
# prometheus (with promtool: the tests of deploy/prometheus/ and the fleet
# recommender's test with a real Prometheus, and bench/run.sh fleet),
# systemd (systemd-analyze verify and security of deploy/systemd/, and
# systemd-socket-activate; installing it starts nothing where systemd is
# not PID 1).
APT_PACKAGES := sysbench qemu-system-x86 linux-image-amd64 busybox-static cpio chromium tmux gcc g++ libc6-dev nginx docker.io prometheus systemd
GOSRC := $(shell find . -name '*.go' -not -path './bin/*' 2>/dev/null) go.mod go.sum
# The cpuview preload library (native/cpuview/README.md). internal/cpuview
# embeds the directory it is built into, so every target that compiles Go
# code builds it first. PRELOAD_ASAN is the ASan/UBSan build the tests use.
PRELOAD := internal/cpuview/preload/libcfsprobe-cpuview.so
PRELOAD_ASAN := build/cpuview/asan/libcfsprobe-cpuview.so
PRELOAD_SRC := native/cpuview/cpuview.c native/cpuview/cpuview.map
PRELOAD_CFLAGS := -std=gnu11 -fPIC -shared -Wall -Wextra -Werror -fvisibility=hidden
PRELOAD_LDFLAGS := -Wl,--version-script=native/cpuview/cpuview.map -Wl,-z,defs -Wl,-z,now -ldl -lpthread
PRELOAD_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The C engine of the CPU-bound workloads (native/engine/engine.c): a static
# program embedded by internal/workload, so that nothing but the workers
# runs in the measured group.
ENGINE := internal/workload/engine/cfsprobe-engine
ENGINE_CFLAGS := -std=gnu11 -O2 -static -s -Wall -Wextra -Werror
# Everything Go code embeds.
NATIVE := $(PRELOAD) $(ENGINE)

# FORCE: a prerequisite that is always out of date.
.PHONY: FORCE all build image k8s-bins deps test test-untimed test-checks test-compile leftovers-before leftovers-after test-unit test-v2 test-preload preload engine native lint fuzz bench demo screenshot clean

all: build

build: $(BIN)

$(BIN): $(GOSRC) $(NATIVE) $(VERSION_STAMP)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/cfsprobe

# The version the binary reports (cfsprobe version, and every trace's
# tool) is rewritten when it changes, a commit or an edit that makes the
# tree dirty, so that the binary is built again with it.
$(VERSION_STAMP): FORCE
	@mkdir -p $(dir $@)
	@[ "$$(cat $@ 2>/dev/null)" = "$(VERSION)" ] || echo "$(VERSION)" >$@

FORCE:

native: $(NATIVE)

# image builds cfsprobe's container image from the Dockerfile, offline:
# the binary built above and Debian's busybox-static with a link per
# applet (the debug variant's shell and tools) are staged in build/image/,
# the build's whole context, and the Dockerfile's two targets are built
# from it with the legacy builder on the daemon DOCKER_HOST names:
# $(IMAGE) (no shell) and $(IMAGE)-debug. The build runs nothing in a
# container. PLATFORM (linux/arm64) labels the images for another
# architecture whose binary and busybox were given (README: "The image").
IMAGE ?= cfsprobe:$(VERSION)
BUSYBOX ?= /bin/busybox
PLATFORM ?=
IMAGE_CONTEXT := build/image
image: $(BIN)
	@command -v docker >/dev/null && [ -x $(BUSYBOX) ] || $(MAKE) deps
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)/busybox
	cp $(BIN) $(IMAGE_CONTEXT)/cfsprobe
	cp $(BUSYBOX) $(IMAGE_CONTEXT)/busybox/busybox
	@# The applets of the busybox given, or of this machine's when it is another architecture's.
	for a in $$($(BUSYBOX) --list 2>/dev/null || /bin/busybox --list); do \
		[ "$$a" = busybox ] || ln -s busybox $(IMAGE_CONTEXT)/busybox/$$a; \
	done
	DOCKER_BUILDKIT=0 docker build -q $(if $(PLATFORM),--platform $(PLATFORM)) --target debug -t $(IMAGE)-debug -f Dockerfile $(IMAGE_CONTEXT)
	DOCKER_BUILDKIT=0 docker build -q $(if $(PLATFORM),--platform $(PLATFORM)) -t $(IMAGE) -f Dockerfile $(IMAGE_CONTEXT)

preload: $(PRELOAD)

engine: $(ENGINE)

$(ENGINE): native/engine/engine.c
	@command -v $(CC) >/dev/null || $(MAKE) deps
	$(CC) $(ENGINE_CFLAGS) -o $@ native/engine/engine.c -lm -lpthread

$(PRELOAD): $(PRELOAD_SRC)
	@command -v $(CC) >/dev/null || $(MAKE) deps
	$(CC) $(PRELOAD_CFLAGS) -O2 -o $@ native/cpuview/cpuview.c $(PRELOAD_LDFLAGS)

$(PRELOAD_ASAN): $(PRELOAD_SRC)
	@command -v $(CC) >/dev/null || $(MAKE) deps
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -O1 -g $(PRELOAD_SAN) -o $@ native/cpuview/cpuview.c $(PRELOAD_LDFLAGS)

# test-preload runs the library's C tests: each door without and with the
# library, the follow and stress tests, the ASan/UBSan build, and real
# programs (nproc, getconf, python3, nginx, ...).
test-preload: $(PRELOAD) $(PRELOAD_ASAN)
	@command -v $(CXX) >/dev/null || $(MAKE) deps
	LIB=$(PRELOAD) LIB_ASAN=$(PRELOAD_ASAN) BUILD=build/cpuview/tests CC=$(CC) CXX=$(CXX) \
		./native/cpuview/tests/run.sh

# deps installs missing Debian packages (needs root) and Go modules.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq -o DPkg::Lock::Timeout=600 && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 $$missing >/dev/null; \
	fi
	$(GO) mod download

# test runs every test: lint, unit and integration tests on this host's
# cgroups (with the race detector), the preload library's C tests, brief
# fuzzing of every parser, and the cgroup v2 tests in a qemu guest. Around
# them, scripts/leftovers.sh checks that nothing was left behind (after
# removing the groups of earlier runs that were killed): no
# process of a daemon the tests started, mount, cgroup, network link or
# changed sysctl.
#
# It runs in two phases. test-untimed, two jobs at a time: the build of
# the Kubernetes node and helm (test/kubernetes/build/build.sh: compiled
# without optimization, with its module downloads) beside what times
# nothing, one after the other (test-checks): compiling the tests with
# -race, lint, the Debian packages and Go modules the tests need (deps,
# mostly downloads and dpkg while the build keeps the CPUs busy), the
# leftovers' snapshot, the preload library's tests, fuzzing. Then, one at
# a time (-j1, also under make -jN), the tests that measure on real
# cgroups, which must not compete for the CPUs with anything of ours.
# The first phase is CPU-bound on a machine with empty caches: about
# 1,700 s of CPU on 2 CPUs, of which the node's build 1,000 (2026-11-30,
# caches emptied, packages installed: test-untimed 934 s, the node's
# build all of it; beside it the race build 482 s, vet 42, the preload
# tests 69, fuzzing 226; at 21:25 UTC, the compilers' garbage
# collection held off (BUILD_GC), test-untimed 876 s, the
# node's build with its downloads all of it; on 2026-11-25 the node's
# build took 503 s and 461 s of CPU, the machines' speed varies by two).
# With the builds cached, test-untimed takes 140 to 170 s; test-unit
# 1,100 to 1,200 s, most of it the tests that measure (the suites
# measured and simulated, the recommender's reruns, the fleet's three
# minutes under Prometheus, the Kubernetes node); the guest 280 to 460 s
# (the four suites' tests measure again the scenarios where the model and
# the guest's kernel part, and those other work disturbed: 284 to 454 s
# on 2026-12-01 when they measured the whole suite again; on 2026-12-03
# 425 and 538 s measuring only those scenarios, against 591 s before). On a machine with
# nothing, after make deps had installed the packages and modules
# (2026-12-01, 06:19 UTC): test-untimed 807 s, test-unit 1,169 s, the
# guest 430 s, 2,406 s in all.
# README.md gives the totals.
# It prints how long each phase took, for the figures above, and lists
# the tests that were inconclusive: a test that measures skips so when
# other work disturbed each of its failing measurements
# (cmd/cfsprobe/measure_test.go); run them again on a quieter machine.
INCONCLUSIVE := $(CURDIR)/build/inconclusive
export CFSPROBE_INCONCLUSIVE := $(INCONCLUSIVE)
test:
	@mkdir -p $(dir $(INCONCLUSIVE)) && rm -f $(INCONCLUSIVE); \
	t0=$$(date +%s); \
	$(MAKE) --no-print-directory -j2 --output-sync=target test-untimed && \
	t1=$$(date +%s) && echo "make test: test-untimed took $$((t1 - t0)) s" && \
	$(MAKE) --no-print-directory -j1 test-unit && \
	t2=$$(date +%s) && echo "make test: test-unit took $$((t2 - t1)) s" && \
	$(MAKE) --no-print-directory -j1 test-v2 leftovers-after && \
	echo "make test: test-v2 took $$(($$(date +%s) - t2)) s; $$(($$(date +%s) - t0)) s in all"; \
	rc=$$?; \
	if [ -s $(INCONCLUSIVE) ]; then \
		echo "make test: $$(wc -l <$(INCONCLUSIVE)) test(s) inconclusive, the machine too busy for their measurements (run them again on a quieter one):"; \
		sed 's/^/  /' $(INCONCLUSIVE); \
	fi; \
	exit $$rc

test-untimed: k8s-bins test-checks

# test-checks runs its steps one after the other whatever make's -j: the
# snapshot of leftovers after the packages are installed and before
# anything of the tests runs, vet after the race build.
test-checks:
	$(MAKE) --no-print-directory test-compile
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory deps
	$(MAKE) --no-print-directory leftovers-before
	$(MAKE) --no-print-directory test-preload
	$(MAKE) --no-print-directory fuzz

# BUILD_GC is the environment of the two long builds of make test on a
# fresh machine, the race build of the tests (test-compile) and the
# Kubernetes node's (k8s-bins): the compiler and the linker run without
# garbage collection until a heap reaches 3 GiB, and collect from then
# on. From an empty build cache, alone on 2 CPUs (2026-11-30): the race
# build 212 s (390 s of CPU) against 257 s (483 s) with the collector's
# default, its largest process 1.3 GB of memory against 0.4; the node and
# helm 484 s (915 s) against 578 s (1,100 s), 1.8 GB against 1.7. Not for
# fuzzing, whose workers would run so too, nor for test-unit's tests,
# which measure; test-compile's test binaries run no test.
BUILD_GC := GOGC=off GOMEMLIMIT=3GiB

# test-compile builds every test binary with the race detector (and runs
# none of their tests), so that test-unit finds them in the build cache.
test-compile: native
	$(BUILD_GC) $(GO) test -race -count=1 -run '^$$' ./... >/dev/null

LEFTOVERS := build/leftovers.before
leftovers-before:
	@mkdir -p $(dir $(LEFTOVERS))
	@./scripts/leftovers.sh sweep
	@./scripts/leftovers.sh snapshot $(LEFTOVERS)

leftovers-after:
	@./scripts/leftovers.sh compare $(LEFTOVERS)

# k8s-bins builds the Kubernetes node that test/kubernetes starts (kubelet,
# control plane, kubectl, etcd, CNI plugins, the sandbox's pause program)
# and helm with the Prometheus Operator's ServiceMonitor and PrometheusRule
# CRDs (the chart's tests: test/deploy, test/kubernetes) from the Go module
# proxy, once per machine: into
# $${XDG_CACHE_HOME:-~/.cache}/cfsprobe/k8s-<version>/ the first time: 4
# to 8 minutes alone on 2 cores with the modules downloaded (8 on
# 2026-11-30), 8 to 16 beside the rest of make test's builds with the
# downloads; nothing after
# (test/kubernetes/build/build.sh).
k8s-bins:
	@command -v $(CC) >/dev/null || $(MAKE) deps
	$(BUILD_GC) ./test/kubernetes/build/build.sh >/dev/null

# -p 1: packages one at a time, so that timing-sensitive tests on real
# cgroups never compete with each other for this machine's CPUs.
test-unit: native
	$(GO) test -race -p 1 -count=1 -timeout 30m ./...

# vet with -race reads the packages the race build (test-compile) has
# compiled: after it, 10 s instead of 24 (2026-11-25).
lint: native
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -race ./...

# Each parser's fuzz target runs briefly here (scripts/fuzz.sh: FUZZTIME
# each, FUZZJOBS targets at a time, one fuzz worker each); run them longer
# with `make fuzz FUZZTIME=10m`.
FUZZTIME ?= 5s
FUZZJOBS ?= 2
fuzz: native
	./scripts/fuzz.sh $(FUZZTIME) $(FUZZJOBS)

test-v2: deps native
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
screenshot: deps native
	CFSPROBE_REQUIRE_CGROUPS=1 $(GO) test -count=1 -run '^TestScreenshot$$' ./internal/report -args \
		-screenshot=$(CURDIR)/docs/report.png $(if $(SCREENSHOT_TRACES),-screenshot-traces=$(abspath $(SCREENSHOT_TRACES)))

clean:
	rm -rf bin build $(NATIVE)
