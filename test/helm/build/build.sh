#!/usr/bin/env bash
# build.sh builds helm, which the chart's tests run (deploy/helm/cfsprobe),
# once per machine, into a cache outside the repository, and prints the
# binary's path:
#   ${CFSPROBE_HELM_BIN:-${XDG_CACHE_HOME:-~/.cache}/cfsprobe/helm-<version>}/
#     helm
#     crds/  the Prometheus Operator's ServiceMonitor and PrometheusRule
#            CRDs (its module's example/prometheus-operator-crd/), which the
#            node test applies so that the chart's objects of these kinds
#            are made, and checked by their schema, on a real API server
# What is there is kept unless go.mod or go.sum here or this script
# changed since it was made (the directory's .stamp). Everything comes from
# the Go module proxy: no git, no other download. The flags are helm's Makefile's: the
# version `helm version` prints, and the Kubernetes version that `helm
# lint` and `helm template` assume (client-go's v0.N is Kubernetes 1.N).
#   build.sh --check   prints the path if everything is there, else exits 1
#                      (what the tests run: they never build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
GO=${GO:-go}
cd "$here"
version=$(awk '$1 == "helm.sh/helm/v3" { print $2; exit } $1 == "require" && $2 == "helm.sh/helm/v3" { print $3; exit }' go.mod)
dir=${CFSPROBE_HELM_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cfsprobe/helm-$version}
operator=github.com/prometheus-operator/prometheus-operator@v0.85.0
crds="monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml"
stamp=$(cat go.mod go.sum build.sh | sha256sum | cut -c1-16)
if [ "${1:-}" = --check ]; then
	[ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$dir/helm" ] || exit 1
	for c in $crds; do [ -f "$dir/crds/$c" ] || exit 1; done
	echo "$dir/helm"
	exit 0
fi
mkdir -p "$dir"
if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$dir/helm" "$dir/crds"
	echo "$stamp" >"$dir/.stamp"
fi
if [ ! -x "$dir/helm" ]; then
	start=$(date +%s)
	echo "build.sh: helm $version" >&2
	kminor=$($GO list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)
	ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
	for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
		ldflags="$ldflags -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$kminor"
	done
	CGO_ENABLED=0 $GO build -trimpath -ldflags "$ldflags" -o "$dir/helm.tmp" helm.sh/helm/v3/cmd/helm
	mv "$dir/helm.tmp" "$dir/helm"
	echo "build.sh: built in $(( $(date +%s) - start )) s into $dir" >&2
fi
if [ ! -d "$dir/crds" ]; then
	src=$($GO mod download -json "$operator" | awk -F'"' '$2 == "Dir" { print $4 }')
	mkdir -p "$dir/crds.tmp"
	for c in $crds; do cp "$src/example/prometheus-operator-crd/$c" "$dir/crds.tmp/"; done
	mv "$dir/crds.tmp" "$dir/crds"
fi
echo "$dir/helm"
