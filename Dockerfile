# cfsprobe's container image: one static binary on distroless, running as nobody.
#
#   docker build -t ghcr.io/cfsprobe/cfsprobe:latest .
#   docker build --target debug -t ghcr.io/cfsprobe/cfsprobe:latest-debug .
#
# The default image has no shell; the debug target adds busybox (/busybox/sh)
# for deploy/kubernetes/check-daemonset*.yaml, which runs the check and then
# waits. Commands that need root (run, suite, check, cleanup) get it from the
# pod's securityContext, not from the image. Multi-arch:
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... .

# go.mod asks for go 1.26.8; golang:1.26 is the newest 1.26 release (pull it
# again if a cached one is older).
# The build stage runs on the target platform (under emulation for the
# other architecture): the binary embeds two C programs (the workloads' engine
# and the cpuview preload library) that the image's gcc builds natively.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN make native && CGO_ENABLED=0 \
    go build -trimpath \
      -ldflags "-s -w -X github.com/cfsprobe/cfsprobe/internal/lab.Version=${VERSION}" \
      -o /out/cfsprobe ./cmd/cfsprobe

FROM gcr.io/distroless/static:debug-nonroot AS debug
COPY --from=build /out/cfsprobe /cfsprobe
USER 65534
ENTRYPOINT ["/cfsprobe"]

# The default target comes last.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/cfsprobe /cfsprobe
USER 65534
ENTRYPOINT ["/cfsprobe"]
