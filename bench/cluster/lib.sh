# lib.sh — shared by up.sh, down.sh, run.sh and agent.sh (sourced, not run).
#
# A cluster NAME is a set of network namespaces:
#   NAME-sw        the switch: a bridge br0 (or linkd, for delay and loss
#                  without netem) with one port pK per host and one (ph) for
#                  the head node hd, 10.231.0.254 (mpirun runs here, like on
#                  a login node; it holds no ranks)
#   NAME-h1..hN    the hosts: eth0 = 10.231.0.K/24, one veth link to the switch
# and a state folder $DML_CLUSTER_ROOT/NAME (hostfile, hosts map, link table).
# Namespaces are separate network stacks, so two clusters with different
# names reuse the same subnet without meeting.

DML_CLUSTER_ROOT=${DML_CLUSTER_ROOT:-/tmp/dml-cluster}
DML_CLUSTER_SUBNET=10.231.0
DML_CLUSTER_HEAD=$DML_CLUSTER_SUBNET.254

die() { echo "cluster: $*" >&2; exit 1; }

# cluster_ok: exit status 0 where network namespaces can be made here; else
# prints why (one line) and returns 1.
cluster_ok() {
	command -v ip >/dev/null || { echo "iproute2's ip not found (make deps installs it)"; return 1; }
	command -v tc >/dev/null || { echo "iproute2's tc not found (make deps installs it)"; return 1; }
	local probe=dmlprobe-$$ err
	if ! err=$(ip netns add $probe 2>&1); then
		echo "cannot create network namespaces here (needs root or CAP_NET_ADMIN): $err"
		return 1
	fi
	if ! err=$(ip -n $probe link add v0 type veth peer name v1 2>&1); then
		ip netns del $probe 2>/dev/null
		echo "cannot create veth links here: $err"
		return 1
	fi
	ip netns del $probe
}

# netem_ok: 0 where the kernel has the netem qdisc (delay, loss).
netem_ok() {
	local probe=dmlprobe-netem-$$ rc=0
	ip netns add $probe 2>/dev/null || return 1
	ip -n $probe link set lo up
	tc -n $probe qdisc add dev lo root netem delay 1ms >/dev/null 2>&1 || rc=1
	ip netns del $probe
	return $rc
}

# parse_link SPEC: sets link_up link_down link_delay link_loss from
# RATE[,DELAY[,LOSS]] (tc units: 1gbit, 500mbit; 200us, 1ms; 0.1%). RATE is
# both directions, or UP/DOWN as the host sees them (20mbit/1gbit: a slow
# uplink). Empty SPEC: unshaped.
parse_link() {
	local spec=$1 rate r
	link_up="" link_down="" link_delay="" link_loss=""
	[ -n "$spec" ] || return 0
	IFS=, read -r rate link_delay link_loss <<<"$spec"
	link_up=${rate%%/*} link_down=${rate#*/}
	for r in "$link_up" "$link_down"; do
		[[ $r =~ ^[0-9.]+([kmgt]?bit|[kmgt]?bps)$ ]] || die "link rate '$r' in '$spec': want e.g. 1gbit, 100mbit, or UP/DOWN (20mbit/1gbit)"
	done
	[ -z "$link_delay" ] || [[ $link_delay =~ ^[0-9.]+(us|ms|s)$ ]] || die "link delay '$link_delay' in '$spec': want e.g. 200us, 5ms"
	[ -z "$link_loss" ] || [[ $link_loss =~ ^[0-9.]+%$ ]] || die "link loss '$link_loss' in '$spec': want e.g. 0.1%"
	return 0
}
