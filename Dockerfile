# cfsprobe's container image: the static binary the Makefile builds, FROM
# scratch, running as nobody (65534). Nothing is pulled: it builds offline.
#
#   make image                    # cfsprobe:<version> and cfsprobe:<version>-debug
#   make image IMAGE=ghcr.io/cfsprobe/cfsprobe:latest
#
# `make image` builds bin/cfsprobe (CGO_ENABLED=0, the C engine and the
# cpuview preload library embedded), stages it with Debian's busybox-static
# in build/image/ and builds this file's two targets from that directory
# with the legacy builder (DOCKER_BUILDKIT=0 docker build -f Dockerfile
# build/image). The context holds nothing else:
#   build/image/cfsprobe   the binary
#   build/image/busybox    /bin/busybox of Debian's busybox-static (debug only)
#
# The default image has no shell. The debug target adds busybox at
# /busybox (/busybox/sh, PATH=/busybox) for deploy/kubernetes/
# check-daemonset*.yaml, which runs the check and then waits. Commands that
# need root (run, suite, check, cleanup) get it from the pod's
# securityContext or `docker run --user 0`, not from the image.
#
# Other architectures: the binary is the target's, so build it there, or
# cross-compile the C parts with the target's gcc and Go with GOARCH:
#   make image CC=aarch64-linux-gnu-gcc GOARCH=arm64 BUSYBOX=<arm64 busybox>
# (Debian: gcc-aarch64-linux-gnu; busybox-static:arm64 from the arm64
# archive), then `docker build --platform linux/arm64` builds this file
# unchanged: it runs nothing but busybox's installer in the debug target,
# which needs the target's CPU or qemu-user-static's binfmt handlers.

FROM scratch AS debug
COPY busybox /busybox/busybox
RUN ["/busybox/busybox", "--install", "-s", "/busybox"]
ENV PATH=/busybox
COPY cfsprobe /cfsprobe
USER 65534:65534
ENTRYPOINT ["/cfsprobe"]

# The default target comes last.
FROM scratch
COPY cfsprobe /cfsprobe
USER 65534:65534
ENTRYPOINT ["/cfsprobe"]
