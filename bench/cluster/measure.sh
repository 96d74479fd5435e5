#!/usr/bin/env bash
# measure.sh — the test-cluster measurements of the README ("Test
# cluster"): each job on a fresh cluster (run.sh), under the shared
# measurement lock, raw CSV/JSON kept in $OUT, a markdown table printed.
#
#   bench/cluster/measure.sh allreduce   AllReduce ring / tree / mpi against a
#                                        parameter-server round trip, 2 and 4
#                                        hosts, 1gbit and 10gbit links
#   bench/cluster/measure.sh train       dml train samples/s per strategy, same grid
#   bench/cluster/measure.sh filters     --sync ps push filters (none, fp16,
#                                        bf16, sigmod) time to accuracy, 3 hosts
#                                        (1 server, 2 workers): 20mbit links,
#                                        workers' uplinks at 20mbit (the
#                                        server's link and downlinks 1gbit),
#                                        and 1gbit links
#   bench/cluster/measure.sh straggler   dml bench consistency, 4 hosts, all
#                                        1gbit against host 4 on a 100mbit and
#                                        on a 20mbit link
#
# Environment: DML [bin/dml]  R [2] invocations per setting  REUSE [unset;
#   1: keep the finished runs of an earlier invocation in $OUT (train, filters)]
#   OUT [/tmp/dml-cluster-measure]  LOCK [/work/shared-notes/measure.lock,
#   where it exists: each job holds it, none longer than about a minute]
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:?"which measurement? allreduce, train, filters or straggler"}
DML=${DML:-bin/dml} R=${R:-2} OUT=${OUT:-/tmp/dml-cluster-measure}
LOCK=${LOCK:-/work/shared-notes/measure.lock}
mkdir -p "$OUT"
[ -x "$DML" ] || make -s build >/dev/null

# job FILE RUN.SH-ARGS… -- JOB…: one job on a fresh cluster, output in FILE.
job() {
	local f=$1
	shift
	local lock=()
	[ ! -e "$LOCK" ] || lock=(flock "$LOCK")
	if ! "${lock[@]}" bench/cluster/run.sh --name dmlm "$@" >"$f" 2>&1; then
		echo "failed: bench/cluster/run.sh $*" >&2
		tail -5 "$f" >&2
		return 0
	fi
}

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(date -u +%F), $(git describe --always --dirty)"
case $what in
allreduce)
	for i in $(seq "$R"); do
		for h in 2 4; do
			for l in 1gbit 10gbit; do
				job "$OUT/ar.$h.$l.$i.csv" --hosts $h --link $l -- "$DML" bench allreduce \
					-b 1M -e 16M -f 4 -n 10 -w 2 -format csv
				for p in 262144 1048576 4194304; do
					job "$OUT/ps.$h.$l.$i.$p.csv" --hosts $h --link $l -- "$DML" bench ps \
						--params $p -n 10 -w 2 -format csv
				done
			done
		done
	done
	python3 - "$OUT" "$R" <<'PY'
import csv, glob, sys, collections
out, R = sys.argv[1], int(sys.argv[2])
t = collections.defaultdict(list)
for h in (2, 4):
    for l in ("1gbit", "10gbit"):
        for i in range(1, R + 1):
            for row in csv.reader(open(f"{out}/ar.{h}.{l}.{i}.csv")):
                if row and row[0] in ("ring", "tree", "mpi") and row[1].isdigit():
                    t[h, l, int(row[1]), row[0]].append(float(row[3]) / 1e3)
            for f in glob.glob(f"{out}/ps.{h}.{l}.{i}*.csv"):
                for row in csv.reader(open(f)):
                    if row and row[0].startswith("dense "):
                        keys = int(row[6])
                        t[h, l, keys * 4, "ps"].append(1e3 / float(row[8]))
def cell(v):
    if not v: return "–"
    return f"{min(v):.1f}" if len(v) == 1 or max(v) - min(v) < 0.05 else f"{min(v):.1f}–{max(v):.1f}"
print("| hosts | link | size | ring (ms) | tree (ms) | mpi (ms) | ps round trip (ms) |")
print("|---|---|---|---|---|---|---|")
for h in (2, 4):
    for l in ("1gbit", "10gbit"):
        for s in (1 << 20, 4 << 20, 16 << 20):
            print(f"| {h} | {l} | {s >> 20} MiB | " + " | ".join(cell(t[h, l, s, a]) for a in ("ring", "tree", "mpi", "ps")) + " |")
PY
	;;
train)
	common=(train --model mlp --hidden 256,128 --data fashion-mnist --epochs 1 --batch 64 --max-steps 150
		--eval-every 0 --progress never)
	strategies=("allreduce ring" "allreduce tree" "allreduce mpi" "ps")
	for i in $(seq "$R"); do
		for h in 2 4; do
			for l in 1gbit 10gbit; do
				for s in "${strategies[@]}"; do
					read -r sync algo <<<"$s"
					args=(--sync "$sync")
					[ -z "$algo" ] || args+=(--allreduce "$algo")
					[ "$sync" != ps ] || args+=(--servers 1)
					m=$OUT/train.$h.$l.${s// /-}.$i.json
					[ "${REUSE:-}" != 1 ] || ! grep -q '^done:' "$OUT/train.$h.$l.${s// /-}.$i.out" 2>/dev/null || continue
					rm -f "$m"
					job "$OUT/train.$h.$l.${s// /-}.$i.out" --hosts $h --link $l -- "$DML" "${common[@]}" "${args[@]}" --metrics "$m"
				done
			done
		done
	done
	python3 - "$OUT" "$R" <<'PY'
import re, sys
out, R = sys.argv[1], int(sys.argv[2])
print("| hosts | link | allreduce ring | allreduce tree | allreduce mpi | ps (1 server + hosts−1 workers) |")
print("|---|---|---|---|---|---|")
for h in (2, 4):
    for l in ("1gbit", "10gbit"):
        cells = []
        for s in ("allreduce-ring", "allreduce-tree", "allreduce-mpi", "ps"):
            v = []
            for i in range(1, R + 1):
                # The run's total over all workers ("done: … (N samples/s)");
                # --sync ps's per-epoch metrics count the reporting worker only.
                try:
                    for x in open(f"{out}/train.{h}.{l}.{s}.{i}.out"):
                        mm = re.match(r"done: .*\(([0-9.]+) samples/s\)", x)
                        if mm: v.append(float(mm.group(1)))
                except OSError:
                    pass
            cells.append("–" if not v else f"{min(v):,.0f}–{max(v):,.0f}" if len(v) > 1 else f"{v[0]:,.0f}")
        print(f"| {h} | {l} | " + " | ".join(cells) + " |")
PY
	;;
filters)
	filters=(none fp16 bf16 sigmod:0.001 sigmod:0.001,fp16)
	for i in $(seq "$R"); do
		for l in 20mbit uplink 1gbit; do
			case $l in
			uplink) links=(--link 20mbit/1gbit --host-link 1=1gbit) ;;
			*) links=(--link $l) ;;
			esac
			for f in "${filters[@]}"; do
				fl=()
				[ "$f" = none ] || fl=(--filters "$f")
				# REUSE=1: keep the results of an earlier invocation.
				[ "${REUSE:-}" != 1 ] || ! grep -q '^bsp,' "$OUT/filt.$l.$f.$i.csv" 2>/dev/null || continue
				job "$OUT/filt.$l.$f.$i.csv" --hosts 3 "${links[@]}" -- "$DML" bench consistency \
					--models bsp --straggle 2:1 --epochs 3 --format csv "${fl[@]}"
			done
		done
	done
	python3 - "$OUT" "$R" <<'PY'
import csv, sys
out, R = sys.argv[1], int(sys.argv[2])
fs = ["none", "fp16", "bf16", "sigmod:0.001", "sigmod:0.001,fp16"]
print("| links | filter | to 0.845 (s) | wall, 3 epochs (s) | final acc |")
print("|---|---|---|---|---|")
def rng(v, fmt):
    v = [x for x in v if x is not None]
    if not v: return "not reached"
    return fmt.format(min(v)) if max(v) == min(v) else (fmt + "–" + fmt).format(min(v), max(v))
names = {"20mbit": "20mbit", "uplink": "workers' uplinks 20mbit", "1gbit": "1gbit"}
for l in ("20mbit", "uplink", "1gbit"):
    for f in fs:
        tt, wall, acc = [], [], []
        for i in range(1, R + 1):
            try:
                rows = [r for r in csv.reader(open(f"{out}/filt.{l}.{f}.{i}.csv")) if r and r[0] == "bsp"]
            except OSError:
                continue
            for r in rows:
                tt.append(float(r[2]) if r[2] else None); wall.append(float(r[5])); acc.append(float(r[4]))
        print(f"| {names[l]} | {f} | {rng(tt, '{:.1f}')} | {rng(wall, '{:.1f}')} | {rng(acc, '{:.3f}')} |")
PY
	;;
straggler)
	for i in $(seq "$R"); do
		for slow in "" 4=100mbit 4=20mbit; do
			hl=()
			[ -z "$slow" ] || hl=(--host-link "$slow")
			job "$OUT/strag.${slow:-none}.$i.csv" --hosts 4 --link 1gbit "${hl[@]}" -- "$DML" bench consistency \
				--straggle 3:1 --epochs 3 --target 0.83 --format csv
		done
	done
	python3 - "$OUT" "$R" <<'PY'
import csv, sys, collections
out, R = sys.argv[1], int(sys.argv[2])
d = collections.defaultdict(lambda: collections.defaultdict(list))
order = []
for slow in ("none", "4=100mbit", "4=20mbit"):
    for i in range(1, R + 1):
        try:
            rows = list(csv.reader(open(f"{out}/strag.{slow}.{i}.csv")))
        except OSError:
            continue
        for r in rows:
            if len(r) == 8 and r[0] != "consistency" and not r[0].startswith("#"):
                if r[0] not in order: order.append(r[0])
                d[r[0], slow]["tt"].append(float(r[2]) if r[2] else None)
                d[r[0], slow]["wall"].append(float(r[5])); d[r[0], slow]["acc"].append(float(r[4]))
                d[r[0], slow]["st"].append(int(r[6])); d[r[0], slow]["wait"].append(float(r[7]))
def rng(v, fmt):
    w = [x for x in v if x is not None]
    if not w: return "not reached"
    s = fmt.format(min(w)) if max(w) == min(w) else (fmt + "–" + fmt).format(min(w), max(w))
    return s + (f" ({len(v) - len(w)} not)" if len(w) < len(v) else "")
print("| strategy | host 4's link | to 0.83 (s) | wall, 3 epochs (s) | staleness | wait (s) | final acc |")
print("|---|---|---|---|---|---|---|")
for m in order:
    for slow, name in (("none", "1gbit (all)"), ("4=100mbit", "100mbit"), ("4=20mbit", "20mbit")):
        a = d[m, slow]
        if not a["wall"]: continue
        print(f"| {m} | {name} | {rng(a['tt'], '{:.2f}')} | {rng(a['wall'], '{:.2f}')} | {rng(a['st'], '{}')} | {rng(a['wait'], '{:.2f}')} | {rng(a['acc'], '{:.3f}')} |")
PY
	;;
*) echo "measure.sh: unknown measurement $what (allreduce, train, filters, straggler)" >&2; exit 2 ;;
esac
