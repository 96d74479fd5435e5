#!/usr/bin/env bash
# agent.sh — OpenMPI's remote-shell agent for the test cluster (mpirun
# --mca plm_rsh_agent): `agent.sh [ssh options] HOST COMMAND…` runs COMMAND
# (the orted launch line, a shell command) in HOST's network namespace with
# `ip netns exec`, in place of ssh. HOST is an address from the cluster's
# hostfile; $DML_CLUSTER_DIR/hosts maps it to its namespace. COMMAND also
# gets a UTS namespace of its own whose hostname is the namespace's name:
# the orteds of one machine would otherwise share a hostname, hence a
# session folder, and race on its files (hwloc's shared topology segment:
# orted crashed in hwloc_shmem_topology_write about one start in ten).
set -euo pipefail
while [ $# -gt 0 ] && [[ $1 == -* ]]; do shift; done # ssh options, if any
host=${1:?agent.sh: no host}
shift
hosts=${DML_CLUSTER_DIR:?agent.sh: DML_CLUSTER_DIR not set}/hosts
ns=$(awk -v h="$host" '$1 == h {print $2}' "$hosts")
[ -n "$ns" ] || { echo "agent.sh: host $host is not in $hosts" >&2; exit 1; }
exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$1" && shift && exec /bin/sh -c "$*"' agent "$ns" "$@"
