#!/usr/bin/env bash
# slowlink.sh — issue 21's targets for compressed AllReduce and local SGD:
# time to a target test accuracy of fp32, fp16 (with and without error
# feedback) and --local-steps 4, on bench/cluster's test cluster, over slow
# (100 Mbit/s) and fast (10 Gbit/s) links, one rank per host.
#
#   bench/compress/slowlink.sh [OUT]      (default /tmp/slowlink)
#
# Env: HOSTS (default "2 4"), LINKS ("100mbit 10gbit"), EPOCHS (3), BATCH
# (256), TARGET (0.85), MODES (allreduce,allreduce+fp16,allreduce+fp16+ef,
# allreduce+local4), DML (bin/dml). Each (hosts, link) is one `dml bench
# sweep` whose table goes to OUT/h<hosts>-<link>/ and is printed.
set -euo pipefail
out=${1:-/tmp/slowlink}
dml=${DML:-bin/dml}
modes=${MODES:-allreduce,allreduce+fp16,allreduce+fp16+ef,allreduce+local4}
mkdir -p "$out"
for hosts in ${HOSTS:-2 4}; do
	for link in ${LINKS:-100mbit 10gbit}; do
		d="$out/h$hosts-$link"
		echo "== $hosts hosts, $link links: $d"
		"$dml" bench sweep --hosts "$hosts" --link "$link" --ranks "$hosts" --sync "$modes" \
			--model mlp:1024,1024,1024 --data fashion-mnist --epochs "${EPOCHS:-3}" --batch "${BATCH:-256}" \
			--target "${TARGET:-0.85}" --run-timeout 30m --out "$d" || echo "sweep exit $?"
	done
done
