#!/usr/bin/env bash
# down.sh — take a test cluster down: stop what still runs in its
# namespaces (by pid), delete them (their veths and qdiscs go with them)
# and its state folder.
#
#   bench/cluster/down.sh [NAME]      (default dmlc)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
name=${1:-dmlc}
[[ $name =~ ^[a-zA-Z0-9_-]{1,40}$ ]] || die "bad cluster name '$name'"
mine=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(sw|h[0-9]+)$" || true)
for ns in $mine; do
	pids=$(ip netns pids "$ns" 2>/dev/null)
	[ -z "$pids" ] || kill -TERM $pids 2>/dev/null
done
if [ -n "$mine" ]; then
	for _ in $(seq 20); do
		left=""
		for ns in $mine; do left+=$(ip netns pids "$ns" 2>/dev/null); done
		[ -z "$left" ] && break
		sleep 0.1
	done
	for ns in $mine; do
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[ -z "$pids" ] || kill -KILL $pids 2>/dev/null
	done
fi
for ns in $mine; do ip netns del "$ns"; done
rm -rf "${DML_CLUSTER_ROOT:?}/$name"
