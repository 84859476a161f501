#!/usr/bin/env bash
# build.sh builds the Kubernetes node that test/kubernetes starts, once per
# machine, into a cache outside the repository, and prints its directory:
#   ${CFSPROBE_K8S_BIN:-${XDG_CACHE_HOME:-~/.cache}/cfsprobe/k8s-<version>}/
#     kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl
#     etcd, the CNI plugins loopback ptp host-local, and pause (the program
#     of the pods' sandbox image, which the test packs into an image)
# A binary already there is kept, unless a go.mod or go.sum here changed
# since the directory was filled (its .stamp). Everything comes from the Go
# module proxy: no git, no other download.
#   build.sh --check   prints the directory if every binary is there, else
#                      exits 1 (what the tests run: they never build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
GO=${GO:-go}
version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$here/go.mod")
dir=${CFSPROBE_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cfsprobe/k8s-$version}
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/cni/go.mod" "$here/cni/go.sum" | sha256sum | cut -c1-16)
bins="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd loopback ptp host-local pause"
if [ "${1:-}" = --check ]; then
	[ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] || exit 1
	for b in $bins; do [ -x "$dir/$b" ] || exit 1; done
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"
if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
	find "$dir" -mindepth 1 -delete
	echo "$stamp" >"$dir/.stamp"
fi
cd "$here"
minor=${version#v1.}; minor=${minor%%.*}
vpkg=k8s.io/component-base/version
kflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
kflags="$kflags -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
export CGO_ENABLED=0
# gobuild LDFLAGS NAME=PACKAGE...: the commands whose NAME is not in $dir
# yet, in one go build, which compiles their packages side by side and
# links them in parallel: one build after another leaves a CPU idle in
# each link (the five Kubernetes commands from an empty build cache: 275 s
# in one build, 307 s one after another). The linker ignores -X for
# packages a command lacks.
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
	$GO build -trimpath -ldflags "$ldflags" -o "$tmp/" "${list[@]}"
	for i in "${!names[@]}"; do
		# go build's name: the path's last element, or the one before
		# a major version's (go.etcd.io/etcd/server/v3: server).
		exe=${list[$i]##*/}
		[[ $exe =~ ^v[0-9]+$ ]] && { exe=${list[$i]%/*}; exe=${exe##*/}; }
		mv "$tmp/$exe" "$dir/${names[$i]}"
	done
	rmdir "$tmp"
}
trap 'rm -rf "$dir"/.build.*' EXIT
start=$(date +%s)
built=0
k=k8s.io/kubernetes/cmd
gobuild "$kflags" kube-apiserver=$k/kube-apiserver kube-controller-manager=$k/kube-controller-manager \
	kube-scheduler=$k/kube-scheduler kubelet=$k/kubelet kubectl=$k/kubectl etcd=go.etcd.io/etcd/server/v3
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
