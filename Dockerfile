# cfsprobe's container image: the static binary the Makefile builds, FROM
# scratch, running as nobody (65534). Nothing is pulled and nothing runs
# during the build: it builds offline, for any architecture.
#
#   make image                                  # cfsprobe:<version>, cfsprobe:<version>-debug
#   make image IMAGE=ghcr.io/cfsprobe/cfsprobe:latest
#
# `make image` builds bin/cfsprobe (CGO_ENABLED=0, with the C engine and
# the cpuview preload library embedded), stages it in build/image/ with
# Debian's busybox-static and a link per busybox applet, and builds this
# file's two targets from that directory with the legacy builder
# (DOCKER_BUILDKIT=0 docker build -f Dockerfile build/image). The context
# holds nothing else:
#   cfsprobe          the binary
#   busybox/busybox   /bin/busybox of busybox-static, and busybox/sh,
#                     busybox/sleep, ... links to it (the debug target only)
#
# The default image has no shell. The debug target adds busybox at
# /busybox (/busybox/sh, PATH=/busybox) for deploy/kubernetes/
# check-daemonset*.yaml, which runs the check and then waits. Commands that
# need root (run, suite, check, cleanup) get it from the pod's
# securityContext or `docker run --user 0`, not from the image.
#
# Another architecture: see README.md, "The image".

FROM scratch AS debug
COPY busybox/ /busybox/
ENV PATH=/busybox
COPY cfsprobe /cfsprobe
USER 65534:65534
ENTRYPOINT ["/cfsprobe"]

# The default target comes last.
FROM scratch
COPY cfsprobe /cfsprobe
USER 65534:65534
ENTRYPOINT ["/cfsprobe"]
