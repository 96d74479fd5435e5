#!/usr/bin/env bash
# slurm.sh — a single-node Slurm on this machine for one command: starts
# munged (its own key and socket), slurmctld and slurmd (Debian's slurm-wlm,
# no systemd: each a child of this script, in the foreground), waits for the
# node to be idle, runs COMMAND with SLURM_CONF set, and stops the three
# daemons (by pid) and removes their folder, also when COMMAND fails.
#
#   bench/cluster/slurm.sh [--cpus N] -- COMMAND…
#
# e.g.  bench/cluster/slurm.sh -- srun --mpi=pmix -n 2 bin/dml train --data synthetic
#
# Needs root (slurmd) and the packages slurmd slurmctld slurm-client munge.
# Exits with COMMAND's status (2 when the daemons did not come up).
set -euo pipefail
cpus=$(nproc)
while [ $# -gt 0 ]; do
	case $1 in
	--cpus) cpus=$2; shift 2 ;;
	--) shift; break ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "slurm.sh: unknown flag $1 (the command goes after --)" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "slurm.sh: no command" >&2; exit 2; }
for c in munged slurmctld slurmd srun sinfo; do
	command -v $c >/dev/null || { echo "slurm.sh: $c not found (apt-get install slurmd slurmctld slurm-client munge)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "slurm.sh: slurmd needs root" >&2; exit 2; }

dir=$(mktemp -d /tmp/dml-slurm.XXXXXX)
pids=()
# slurmd starts a slurmstepd per job step, which outlives a killed slurmd:
# those that were not there before this script are ours to stop.
before=" $( (pgrep -x slurmstepd || true) | tr '\n' ' ') "
stepds() {
	for p in $(pgrep -x slurmstepd); do
		case "$before" in *" $p "*) ;; *) echo "$p" ;; esac
	done
}
stop() {
	pids+=($(stepds))
	[ ${#pids[@]} = 0 ] || kill "${pids[@]}" 2>/dev/null || true
	for _ in $(seq 50); do
		alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	pids+=($(stepds))
	[ ${#pids[@]} = 0 ] || kill -KILL "${pids[@]}" 2>/dev/null || true
	rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Ports of our own, so that two of these (or a system Slurm) do not meet:
# a pair free now, below the kernel's ephemeral range (outgoing connections
# take ports from that range at random: a slurmd port there was once taken
# by one, and slurmd could not listen).
read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_lo=32768
span=$(((eph_lo - 10000) / 2))
port=
for i in $(seq 0 199); do
	p=$((10000 + (($$ + i * 7919) % span) * 2))
	if [ -z "$(ss -Htan "( sport = :$p or sport = :$((p + 1)) )" 2>/dev/null)" ]; then
		port=$p
		break
	fi
done
[ -n "$port" ] || { echo "slurm.sh: no free pair of ports below $eph_lo" >&2; exit 2; }
host=$(hostname)
mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 600 "$dir/munge/munge.key"
cat >"$dir/slurm.conf" <<CONF
ClusterName=dml
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF=$dir/slurm.conf
munged -F -f --socket "$dir/munge/munge.socket" --key-file "$dir/munge/munge.key" \
	--pid-file "$dir/munge/munged.pid" --log-file "$dir/munge/munged.log" --seed-file "$dir/munge/seed" >"$dir/munged.out" 2>&1 &
pids+=($!)
slurmctld -D -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 150); do
	if [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; then up=1; break; fi
	sleep 0.2
done
if [ $up = 0 ]; then
	echo "slurm.sh: the node did not become idle in 30 s; logs:" >&2
	tail -n 5 "$dir"/*.log "$dir"/*.out "$dir/munge/munged.log" >&2 2>/dev/null || true
	exit 2
fi
echo "slurm.sh: single-node Slurm up ($host, $cpus CPUs, SLURM_CONF=$SLURM_CONF)" >&2
rc=0
"$@" || rc=$?
exit $rc
