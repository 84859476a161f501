#!/usr/bin/env bash
# build.sh builds the Kubernetes node that test/kubernetes starts, and helm,
# which the chart's tests run (deploy/helm/cfsprobe), once per machine, into
# a cache outside the repository, and prints its directory:
#   ${CFSPROBE_K8S_BIN:-${XDG_CACHE_HOME:-~/.cache}/cfsprobe/k8s-<version>}/
#     kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl
#     etcd, the CNI plugins loopback ptp host-local, pause (the program of
#     the pods' sandbox image, which the test packs into an image), helm,
#     and crds/: the Prometheus Operator's ServiceMonitor and PrometheusRule
#     CRDs (its module's example/prometheus-operator-crd/), which the node
#     test applies so that the chart's objects of these kinds are made, and
#     checked by their schema, on a real API server
# What is there is kept, unless a go.mod or go.sum here, the flags or the
# CRDs' version changed since the directory was filled (its .stamp).
# Everything comes from the Go module proxy: no git, no other download.
#   build.sh --check   prints the directory if everything is there, else
#                      exits 1 (what the tests run: they never build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
GO=${GO:-go}
version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$here/go.mod")
dir=${CFSPROBE_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cfsprobe/k8s-$version}
minor=${version#v1.}; minor=${minor%%.*}
vpkg=k8s.io/component-base/version
kflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
kflags="$kflags -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
# helm's flags are its Makefile's: the version `helm version` prints, and
# the Kubernetes version that `helm lint` and `helm template` assume, the
# node's (helm's Makefile takes it from client-go's v0.N, Kubernetes 1.N).
helm=$(awk '$1 == "helm.sh/helm/v3" { print $2; exit }' "$here/go.mod")
hflags="-X helm.sh/helm/v3/internal/version.version=$helm -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	hflags="$hflags -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$minor"
done
# Compiled without optimization or inlining: they are the tests' fixtures,
# not what is measured, and on a fresh machine their build is the longest
# step of make test. From an empty build cache the node and helm took 239 s
# (461 s of CPU) against 302 s (585); test/kubernetes ran 133 s with them
# against 127, test/deploy 51 against 55 (2026-11-25).
gcflags="all=-N -l"
# make k8s-bins runs this with the compiler's garbage collection held off
# (the Makefile's BUILD_GC, which gives the figures).
operator=github.com/prometheus-operator/prometheus-operator@v0.85.0
stamp=$({ cat "$here/go.mod" "$here/go.sum" "$here/cni/go.mod" "$here/cni/go.sum"; echo "$kflags $hflags $gcflags $operator"; } | sha256sum | cut -c1-16)
bins="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd helm loopback ptp host-local pause"
crds="monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml"
if [ "${1:-}" = --check ]; then
	[ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] || exit 1
	for b in $bins; do [ -x "$dir/$b" ] || exit 1; done
	for c in $crds; do [ -f "$dir/crds/$c" ] || exit 1; done
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"
if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
	find "$dir" -mindepth 1 -delete
	echo "$stamp" >"$dir/.stamp"
fi
cd "$here"
export CGO_ENABLED=0
# gobuild LDFLAGS NAME=PACKAGE...: the commands whose NAME is not in $dir
# yet, in one go build, which compiles their packages side by side and
# links them in parallel: one build after another leaves a CPU idle in
# each link (the five Kubernetes commands from an empty build cache: 275 s
# in one build, 307 s one after another). The linker ignores -X for
# packages a command lacks. helm, built on the node's Kubernetes libraries,
# adds 13 s of CPU to the node's build (302 s against 296 from an empty
# cache), where helm v3.22 alone, on its own libraries, took 172.
gobuild() {
	local ldflags=$1 names=() list=() tmp i exe
	shift
	for np in "$@"; do
		[ -x "$dir/${np%%=*}" ] || { names+=("${np%%=*}"); list+=("${np#*=}"); }
	done
	[ ${#names[@]} -gt 0 ] || return 0
	built=1
	echo "build.sh: ${names[*]}" >&2
	tmp=$(mktemp -d "$dir/.build.XXXXXX")
	$GO build -trimpath -gcflags="$gcflags" -ldflags "$ldflags" -o "$tmp/" "${list[@]}"
	for i in "${!names[@]}"; do
		# go build's name: the path's last element, or the one before
		# a major version's (go.etcd.io/etcd/server/v3: server).
		exe=${list[$i]##*/}
		[[ $exe =~ ^v[0-9]+$ ]] && { exe=${list[$i]%/*}; exe=${exe##*/}; }
		mv "$tmp/$exe" "$dir/${names[$i]}"
	done
}
# The temporary directories of gobuild, emptied or not.
trap 'rm -rf "$dir"/.build.*' EXIT
start=$(date +%s)
built=0
k=k8s.io/kubernetes/cmd
gobuild "$kflags $hflags" kube-apiserver=$k/kube-apiserver kube-controller-manager=$k/kube-controller-manager \
	kube-scheduler=$k/kube-scheduler kubelet=$k/kubelet kubectl=$k/kubectl etcd=go.etcd.io/etcd/server/v3 \
	helm=helm.sh/helm/v3/cmd/helm
if [ ! -d "$dir/crds" ]; then
	src=$($GO mod download -json "$operator" | awk -F'"' '$2 == "Dir" { print $4 }')
	mkdir -p "$dir/crds.tmp"
	for c in $crds; do cp "$src/example/prometheus-operator-crd/$c" "$dir/crds.tmp/"; done
	mv "$dir/crds.tmp" "$dir/crds"
fi
cd "$here/cni"
c=github.com/containernetworking/plugins/plugins
gobuild "-s -w" loopback=$c/main/loopback ptp=$c/main/ptp host-local=$c/ipam/host-local
cd "$here"
if [ ! -x "$dir/pause" ]; then
	built=1
	echo "build.sh: pause" >&2
	src=$($GO list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
	${CC:-cc} -Os -static -s -Wall -DVERSION="$version" -o "$dir/pause.tmp" "$src"
	mv "$dir/pause.tmp" "$dir/pause"
fi
[ "$built" = 0 ] || echo "build.sh: built in $(( $(date +%s) - start )) s into $dir" >&2
echo "$dir"
