#!/usr/bin/env bash
# overlap.sh — does reducing gradient buckets during the backward pass pay
# on this machine? Runs the same `dml train` with --overlap=true and
# --overlap=false alternately, R times each, in this one invocation, and
# prints a markdown table: samples/s, the AllReduce's share of the step
# (comm_fraction), the share of it hidden behind the backward pass
# (comm_hidden), and the ratio on/off per pair. The weights are the same
# either way (tested); only the time differs.
#
#   bench/overlap.sh [DML_BINARY]          (default: bin/dml, built by make build)
#
# Environment (defaults in brackets):
#   R [3]  NP [2]  HIDDEN [512,256]  BATCH [64]  STEPS [300]  BUCKET_MB [1]
#   FLAGS        more dml train flags
#   LINK         e.g. 10gbit: run the ranks over TCP on the loopback of a
#                network namespace of their own (dml-overlap), shaped to
#                that rate with tc htb — an emulated network link shared by
#                both directions. Needs root (ip netns, tc); the namespace
#                is removed at exit. Unset: shared memory (vader).
#
# Wrap it in a lock on a shared machine, e.g.
#   flock /work/shared-notes/measure.lock bench/overlap.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dml=${1:-bin/dml}
[ -n "${1:-}" ] || make -s build >/dev/null
R=${R:-3} NP=${NP:-2} HIDDEN=${HIDDEN:-512,256} BATCH=${BATCH:-64} STEPS=${STEPS:-300} BUCKET_MB=${BUCKET_MB:-1}
read -r -a extra <<<"${FLAGS:-}"
mpirun=(mpirun --allow-run-as-root --oversubscribe -np "$NP")
prefix=()
if [ -n "${LINK:-}" ]; then
	ns=dml-overlap
	ip netns add $ns
	trap 'ip netns del '$ns' 2>/dev/null || true' EXIT
	ip netns exec $ns ip link set lo up
	ip netns exec $ns tc qdisc add dev lo root handle 1: htb default 10 r2q 1000
	ip netns exec $ns tc class add dev lo parent 1: classid 1:10 htb rate "$LINK" ceil "$LINK" burst 256k cburst 256k
	prefix=(ip netns exec $ns)
	mpirun+=(--mca btl self,tcp --mca btl_tcp_if_include lo)
else
	mpirun+=(--mca btl self,vader)
fi
dir=$(mktemp -d /tmp/overlap.XXXXXX)
trap 'rm -rf "$dir"; [ -z "${ns:-}" ] || ip netns del $ns 2>/dev/null || true' EXIT

# field FILE NAME: a number from the metrics line.
field() { grep -o "\"$2\":[^,}]*" "$1" | head -1 | cut -d: -f2; }

echo "MLP 784-${HIDDEN//,/-}-10, Fashion-MNIST, $NP ranks × batch $BATCH, $STEPS steps, --bucket-mb $BUCKET_MB, ${LINK:-shared memory}, $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo
echo "| pair | overlap | samples/s | AllReduce share | hidden | on/off |"
echo "|---|---|---|---|---|---|"
ratios=()
for i in $(seq "$R"); do
	declare -A sps=()
	for ov in true false; do
		m=$dir/$i.$ov.json
		"${prefix[@]}" "${mpirun[@]}" "$dml" train --model mlp --hidden "$HIDDEN" --data fashion-mnist --epochs 1 \
			--batch "$BATCH" --max-steps "$STEPS" --eval-every 0 --bucket-mb "$BUCKET_MB" --overlap=$ov \
			--progress never --metrics "$m" "${extra[@]}" >"$dir/$i.$ov.out" 2>&1 || {
			echo "run $i overlap=$ov failed:" >&2
			tail -5 "$dir/$i.$ov.out" >&2
			exit 1
		}
		sps[$ov]=$(field "$m" samples_per_sec)
		printf '| %d | %s | %.0f | %.1f%% | %s | %s |\n' "$i" "$ov" "${sps[$ov]}" \
			"$(awk -v f="$(field "$m" comm_fraction)" 'BEGIN{print 100*f}')" \
			"$(field "$m" comm_hidden | awk '$1=="null"{print "–"; next}{printf "%.0f%%", 100*$1}')" \
			"$([ $ov = false ] && awk -v a="${sps[true]}" -v b="${sps[false]}" 'BEGIN{printf "%.2f×", a/b}')"
	done
	ratios+=("$(awk -v a="${sps[true]}" -v b="${sps[false]}" 'BEGIN{printf "%.2f", a/b}')")
done
echo
echo "on/off per pair: ${ratios[*]}"
