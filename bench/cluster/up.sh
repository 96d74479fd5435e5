#!/usr/bin/env bash
# up.sh — build a test cluster of N hosts on this machine: N network
# namespaces, each with one veth link to a switch (a bridge in a namespace
# of its own), every link shaped by tc in both directions.
#
#   bench/cluster/up.sh N [--name NAME] [--link RATE[,DELAY[,LOSS]]]
#                         [--host-link K=RATE[,DELAY[,LOSS]]]... [--best-effort]
#
#   --link       every host's link, e.g. 1gbit, 10gbit, 1gbit,200us,0.1%;
#                the rate by htb, delay and loss by netem under it (where
#                the kernel has no netem, by linkd: a user-space switch in
#                place of the bridge, built here with go). Each
#                direction of a link gets the rate (full duplex), so a
#                host-to-host path crosses two shaped links; UP/DOWN rates
#                differ by direction: 20mbit/1gbit is a slow uplink.
#   --host-link  one host's link instead (a straggler): --host-link 3=100mbit
#   --best-effort  where neither netem nor linkd can be had, drop delay and
#                loss with a warning instead of failing (the rate is always
#                applied)
#   --name       cluster name (default dmlc): namespaces NAME-sw, NAME-h1..
#
# Prints the state folder (hostfile, hosts, links) on stdout. Needs root
# (or CAP_NET_ADMIN). Take it down with bench/cluster/down.sh NAME.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

n="" name=dmlc link="" best=0
declare -A hostlink=()
while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$2; shift 2 ;;
	--link) link=$2; shift 2 ;;
	--host-link) hostlink[${2%%=*}]=${2#*=}; shift 2 ;;
	--best-effort) best=1; shift ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown flag $1" ;;
	*) n=$1; shift ;;
	esac
done
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "want a host count 1..200, got '${n}'"
[[ $name =~ ^[a-zA-Z0-9_-]{1,40}$ ]] || die "bad cluster name '$name'"
why=$(cluster_ok) || die "$why"
sw=$name-sw
ip netns list | grep -q "^$sw\b" && die "cluster $name exists (bench/cluster/down.sh $name)"

netem=0
netem_ok && netem=1
# Check every spec before building anything.
for k in "${!hostlink[@]}"; do
	[[ $k =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le "$n" ] || die "--host-link $k=…: no host $k of $n"
done
linkd=0 # delay or loss without netem: the user-space switch linkd does them
for k in $(seq "$n"); do
	parse_link "${hostlink[$k]:-$link}"
	[ $netem = 1 ] || [ -z "$link_delay$link_loss" ] || linkd=1
done

state=$DML_CLUSTER_ROOT/$name
rm -rf "$state" && mkdir -p "$state"
if [ $linkd = 1 ]; then
	if ! out=$(cd "$here/../.." && go build -o "$state/linkd" ./bench/cluster/linkd 2>&1); then
		[ $best = 1 ] || die "this kernel has no netem qdisc (sch_netem) and linkd (the user-space switch for delay and loss) did not build: $out; use a rate only, or --best-effort to drop delay and loss"
		echo "cluster: warning: no netem and no linkd: delay and loss not applied" >&2
		linkd=0
	fi
fi
# If anything below fails, take down what was built.
trap '"$here/down.sh" "$name" >/dev/null 2>&1 || true' ERR
trap '"$here/down.sh" "$name" >/dev/null 2>&1; exit 143' TERM
trap '"$here/down.sh" "$name" >/dev/null 2>&1; exit 130' INT

# shape NS DEV RATE: htb at RATE on DEV's egress, netem under it.
shape() {
	local ns=$1 dev=$2 rate=$3
	[ -n "$rate" ] || return 0
	tc -n "$ns" qdisc add dev "$dev" root handle 1: htb default 10 r2q 1000
	tc -n "$ns" class add dev "$dev" parent 1: classid 1:10 htb rate "$rate" ceil "$rate" burst 256k cburst 256k
	if [ $netem = 1 ] && [ -n "$link_delay$link_loss" ]; then
		tc -n "$ns" qdisc add dev "$dev" parent 1:10 handle 10: netem limit 100000 \
			${link_delay:+delay $link_delay} ${link_loss:+loss $link_loss}
	fi
}

ip netns add "$sw"
ip -n "$sw" link set lo up
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
# The head node (mpirun) is a port of the switch like the hosts, unshaped.
ip -n "$sw" link add hd type veth peer name ph
ip -n "$sw" addr add $DML_CLUSTER_HEAD/24 dev hd
ip -n "$sw" link set hd up
ip -n "$sw" link set ph up
[ $linkd = 1 ] || ip -n "$sw" link set ph master br0
linkd_ports=(-port ph=0s/0s/0/0)
: >"$state/hostfile"
: >"$state/hosts"
{ echo "host ns ip rate delay loss"; } >"$state/links"
for k in $(seq "$n"); do
	h=$name-h$k
	ip netns add "$h"
	ip -n "$h" link set lo up
	ip -n "$sw" link add "p$k" type veth peer name eth0 netns "$h"
	if [ $linkd = 1 ]; then ip -n "$sw" link set "p$k" up; else ip -n "$sw" link set "p$k" master br0 up; fi
	ip -n "$h" addr add $DML_CLUSTER_SUBNET.$k/24 dev eth0
	ip -n "$h" link set eth0 up
	parse_link "${hostlink[$k]:-$link}"
	if [ $netem = 0 ] && [ $linkd = 0 ] && [ -n "$link_delay$link_loss" ]; then
		echo "cluster: warning: host $k: delay/loss '${link_delay},${link_loss}' not applied (no netem in this kernel)" >&2
		link_delay="" link_loss=""
	fi
	if [ $linkd = 1 ]; then
		# linkd takes delay and loss (% → fraction); shape() below sets
		# the rate only (no netem here).
		l=${link_loss:-0%}
		linkd_ports+=(-port "p$k=${link_delay:-0s}/${link_delay:-0s}/$(awk -v p="${l%\%}" 'BEGIN{print p/100}')/$(awk -v p="${l%\%}" 'BEGIN{print p/100}')")
	fi
	shape "$h" eth0 "$link_up"     # host → switch
	shape "$sw" "p$k" "$link_down" # switch → host
	echo "$DML_CLUSTER_SUBNET.$k slots=1" >>"$state/hostfile"
	echo "$DML_CLUSTER_SUBNET.$k $h" >>"$state/hosts"
	rate=$link_up
	[ "$link_down" = "$link_up" ] || rate=$link_up/$link_down
	echo "$k $h $DML_CLUSTER_SUBNET.$k ${rate:-none} ${link_delay:--} ${link_loss:--}" >>"$state/links"
done
if [ $linkd = 1 ]; then
	ip netns exec "$sw" "$state/linkd" "${linkd_ports[@]}" >"$state/linkd.log" 2>&1 </dev/null &
	for _ in $(seq 100); do
		grep -q forwarding "$state/linkd.log" && break
		kill -0 $! 2>/dev/null || die "linkd failed: $(cat "$state/linkd.log")"
		sleep 0.05
	done
	echo "linkd" >"$state/switch"
fi
# Wait until every link is up at both ends and its switch port forwards
# (ports come up asynchronously).
for k in $(seq "$n"); do
	for _ in $(seq 100); do
		[ "$(ip -n "$name-h$k" -o link show eth0 | grep -c 'state UP')" = 1 ] &&
			ip -n "$sw" -o link show "p$k" | grep -q 'state UP' &&
			{ [ $linkd = 1 ] || bridge -n "$sw" link show dev "p$k" | grep -q 'state forwarding'; } &&
			{ [ $linkd = 1 ] || bridge -n "$sw" link show dev ph | grep -q 'state forwarding'; } && break
		sleep 0.05
	done
done
trap - ERR TERM INT
echo "$state"
