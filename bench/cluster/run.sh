#!/usr/bin/env bash
# run.sh — set up a test cluster, run one mpirun job across its hosts over
# TCP, take the cluster down (also when the job fails or is interrupted),
# and exit with the job's status.
#
#   bench/cluster/run.sh --hosts N [--link SPEC] [--host-link K=SPEC]...
#                        [--name NAME] [--best-effort] [--keep]
#                        -- [mpirun options] PROGRAM [ARGS…]
#
# e.g.  bench/cluster/run.sh --hosts 4 --link 1gbit -- -np 4 bin/dml bench allreduce
#       bench/cluster/run.sh --hosts 3 --link 10gbit --host-link 3=1gbit -- \
#           bin/dml train --sync ps --consistency ssp --data synthetic
#
# Without -np, one rank per host. Ranks are placed round-robin over the
# hosts (--map-by node), so -np 8 on 4 hosts puts two on each. mpirun runs in
# the switch namespace (the head node, 10.231.0.254), starts one orted per
# host through agent.sh (ip netns exec in place of ssh), and the ranks talk
# TCP only (btl self,tcp), over the cluster's subnet only. SPEC
# (RATE[,DELAY[,LOSS]], RATE or UP/DOWN) and the other flags are up.sh's.
# Interrupting the job's process group (Ctrl-C, or SIGTERM to -PGID) also
# takes the cluster down. The mpirun line is printed to stderr first.
# --keep leaves the cluster up afterwards (down.sh NAME takes it down).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

hosts="" name=dmlc keep=0
up=()
while [ $# -gt 0 ]; do
	case $1 in
	--hosts) hosts=$2; shift 2 ;;
	--link|--host-link|--name) up+=("$1" "$2"); [ "$1" != --name ] || name=$2; shift 2 ;;
	--best-effort) up+=("$1"); shift ;;
	--keep) keep=1; shift ;;
	--) shift; break ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown flag $1 (the job goes after --)" ;;
	esac
done
[ -n "$hosts" ] || die "--hosts N is needed"
[ $# -gt 0 ] || die "nothing to run: give mpirun options and a program after --"
command -v mpirun >/dev/null || die "mpirun not found (make deps installs OpenMPI)"

np=()
for a in "$@"; do case $a in -np|-n|--np|-c) np=(x) ;; esac; done
[ ${#np[@]} -gt 0 ] && np=() || np=(-np "$hosts")

# Take down only a cluster this run made (a name in use is up.sh's error).
state=""
[ "$keep" = 1 ] || trap '[ -z "$state" ] || "$here/down.sh" "$name" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
state=$("$here/up.sh" "$hosts" "${up[@]}")
export DML_CLUSTER_DIR=$state
mpirun=(mpirun --oversubscribe --map-by node --hostfile "$state/hostfile"
	--mca plm_rsh_agent "$here/agent.sh"
	--mca btl self,tcp --mca btl_tcp_if_include $DML_CLUSTER_SUBNET.0/24
	--mca oob_tcp_if_include $DML_CLUSTER_SUBNET.0/24
	--mca pml ob1 --mca osc ^ucx --mca btl_tcp_links 1
	-x DML_CLUSTER_DIR "${np[@]}")
[ "$(id -u)" != 0 ] || mpirun+=(--allow-run-as-root)
echo "cluster $name: $hosts hosts, links: $(awk 'NR>1 {printf "%s%s=%s/%s/%s", sep, $1, $4, $5, $6; sep=" "}' "$state/links")" >&2
echo "+ ip netns exec $name-sw ${mpirun[*]} $*" >&2
rc=0
ip netns exec "$name-sw" "${mpirun[@]}" "$@" || rc=$?
exit $rc
