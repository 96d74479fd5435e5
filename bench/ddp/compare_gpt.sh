#!/usr/bin/env bash
# dml vs PyTorch DDP on a GPT (issue 33's CPU target), side by side.
#
#   bench/ddp/compare_gpt.sh [DML_BINARY]
#
# Makes the corpus (bench/text/gocorpus.sh: the Go toolchain's sources),
# saves dml's initial weights once (--max-steps 0 --save), then runs,
# alternately and R times each,
#
#   mpirun -np $NP DML train --model gpt --layers L --heads H --embed E
#       --seq-len T --data text --train CORPUS --test CORPUS.test
#       --batch B --optimizer adamw --lr LR --weight-decay WD
#       --warmup-epochs W --max-steps S --metrics FILE --resume-weights? (no:
#       the same --seed draws the same initial weights)
#   /usr/bin/python3 bench/ddp/ddp_gpt.py --init INIT.npz ... (the same)
#
# and prints a markdown table: tokens/s of each run, the training loss of
# the last epoch and the test loss, and dml/DDP per pair and of the means.
# Environment (defaults in brackets): R [3], NP [2], B [16], T [128], L [4],
# H [4], E [128], LR [1e-3], WD [0.1], W [0.1] (warm-up epochs), S [200]
# (steps per run), MB [8] (corpus megabytes), PYTHON [/usr/bin/python3],
# KEEP (a folder for the raw outputs). One compute thread per rank on both
# sides, ranks pinned to cores when NP ≤ nproc.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
R=${R:-3} NP=${NP:-2} B=${B:-16} T=${T:-128} L=${L:-4} H=${H:-4} E=${E:-128}
LR=${LR:-1e-3} WD=${WD:-0.1} W=${W:-0.1} S=${S:-200} MB=${MB:-8}
PYTHON=${PYTHON:-/usr/bin/python3}
die() { echo "compare_gpt.sh: $*" >&2; exit 1; }
if [[ $# -eq 1 ]]; then dml=$1; else make -C "$root" build >&2; dml=$root/bin/dml; fi
[[ -x $dml ]] || die "$dml: not an executable"
"$PYTHON" -c 'import torch' 2>/dev/null || die "$PYTHON has no torch: apt-get install python3-torch, or set PYTHON"
if [[ -n ${KEEP:-} ]]; then out=$KEEP; mkdir -p "$out"; else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
corpus=$out/go.txt
[[ -f $corpus ]] || "$root/bench/text/gocorpus.sh" "$corpus" "$MB" 1 >&2
mpi=(mpirun -np "$NP" --mca btl self,vader)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
bind=()
if ((NP > $(nproc))); then mpi+=(--oversubscribe --bind-to none); bind=(--no-bind); else mpi+=(--bind-to core); fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
mpi+=(-x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x MKL_NUM_THREADS)
model=(--model gpt --layers "$L" --heads "$H" --embed "$E" --seq-len "$T" --data text --train "$corpus" --test "$corpus.test")
"$dml" train "${model[@]}" --max-steps 0 --save "$out/init.npz" >/dev/null
dml_cmd=("${mpi[@]}" "$dml" train "${model[@]}" --batch "$B" --optimizer adamw --lr "$LR" --weight-decay "$WD"
	--warmup-epochs "$W" --max-steps "$S" --epochs 1000 --sync allreduce --progress never)
ddp_cmd=("$PYTHON" "$here/ddp_gpt.py" --init "$out/init.npz" --text "$corpus" --test "$corpus.test" --ranks "$NP"
	--batch "$B" --seq-len "$T" --heads "$H" --lr "$LR" --weight-decay "$WD" --warmup-epochs "$W" --max-steps "$S" --epochs 1000 "${bind[@]}")
echo "dml: ${dml_cmd[*]} --metrics FILE" >&2
echo "ddp: ${ddp_cmd[*]}" >&2
for ((r = 1; r <= R; r++)); do
	echo "== run $r/$R" >&2
	"${dml_cmd[@]}" --metrics "$out/dml-$r.jsonl" >"$out/dml-$r.log" 2>&1 || { cat "$out/dml-$r.log" >&2; die "dml run $r failed"; }
	tail -1 "$out/dml-$r.log" >&2
	"${ddp_cmd[@]}" >"$out/ddp-$r.log" 2>&1 || { cat "$out/ddp-$r.log" >&2; die "ddp run $r failed"; }
	grep '^epoch' "$out/ddp-$r.log" | tail -1 >&2
done
"$PYTHON" - "$out" "$R" "$T" <<'PY'
import json, math, sys
out, R, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mean = lambda xs: sum(xs) / len(xs)
rows, d_all, p_all, ratios, losses = [], [], [], [], []
for r in range(1, R + 1):
    de = [json.loads(l) for l in open(f"{out}/dml-{r}.jsonl") if l.strip()]
    pe = next(json.loads(l[7:]) for l in open(f"{out}/ddp-{r}.log") if l.startswith("RESULT "))["epochs"]
    # Throughput over the whole run: tokens / training seconds.
    dtok = sum(e["samples_per_sec"] * e["train_sec"] for e in de) * T / sum(e["train_sec"] for e in de)
    ptok = sum(e["tokens_per_sec"] * e["wall_sec"] for e in pe) / sum(e["wall_sec"] for e in pe)
    d_all.append(dtok); p_all.append(ptok); ratios.append(dtok / ptok)
    losses.append((de[-1]["loss"], pe[-1]["loss"], de[-1].get("test_loss"), pe[-1]["test_loss"]))
    rows.append(f"| {r} | {dtok:,.0f} | {ptok:,.0f} | {dtok/ptok:.2f}× | {de[-1]['loss']:.4f} / {pe[-1]['loss']:.4f} | "
                f"{de[-1].get('test_loss', float('nan')):.4f} / {pe[-1]['test_loss']:.4f} |")
print("| run | dml tokens/s | DDP tokens/s | dml/DDP | train loss, last epoch (dml / DDP) | test loss (dml / DDP) |")
print("|---|---|---|---|---|---|")
print("\n".join(rows))
print(f"\n- dml/DDP per run: {', '.join(f'{x:.2f}×' for x in ratios)}; ratio of the means {mean(d_all)/mean(p_all):.2f}×")
print(f"- test loss, dml − DDP (relative): {', '.join(f'{(a-b)/b:+.1%}' for _, _, a, b in losses if a is not None)}")
PY
echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) CPUs, OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}; $("$dml" version 2>/dev/null || echo dml); torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
