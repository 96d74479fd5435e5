#!/usr/bin/env bash
# dml vs PyTorch DDP on the same CPUs: issue 9's target.
#
#   bench/ddp/compare.sh [DML_BINARY]
#
# Runs, alternately and R times each in this one invocation,
#
#   mpirun -np $NP --bind-to core DML train --model mlp --hidden $HIDDEN \
#       --data fashion-mnist --epochs $EPOCHS --batch $BATCH --lr $LR \
#       --momentum $MOMENTUM --seed $SEED --metrics FILE [--backend $DML_BACKEND]
#   /usr/bin/python3 bench/ddp/ddp_mlp.py --ranks $NP ... (the same settings)
#
# and prints a markdown table: each run's samples/s per epoch and mean, test
# accuracy after the last epoch, achieved GFLOP/s per rank, and the ratio
# dml/DDP (per pair of neighbouring runs, and of the means), with the
# machine. Optional for users, and no part of `make test`: it needs
# Debian's python3-torch (apt-get install python3-torch) and OpenMPI.
#
# DML_BINARY: the dml to run; without it `make build` (re)builds bin/dml.
# Environment (defaults in brackets):
#   MODEL [mlp]       mlp, or lenet5 (issue 19's CNN: --model lenet5 on both
#                     sides; HIDDEN is then unused, and FLOPs count the
#                     convolutions as im2col GEMMs), or resnet20, vgg16,
#                     resnet50, alexnet (on SAMPLES [4096] random 3×32×32
#                     images on each side: throughput only)
#   SIDE [32]         the synthetic images' side (3×SIDE×SIDE; MODEL=resnet50
#                     SIDE=224 is torchvision's resnet50); FLOPs are printed
#                     for 32 only
#   R [3]             repetitions of each side
#   EPOCHS [3]  NP [2]  BATCH [64] (per rank)  HIDDEN [512,256]
#   LR [0.05]  MOMENTUM [0.9]  SEED [1]   (weight decay: 0 on both sides,
#                     dml's default; the rule is PyTorch's SGD momentum,
#                     dampening 0, no Nesterov, on both sides)
#   DML_BACKEND       passed as --backend (cpu, blas, ...); unset: dml's default
#   DML_FLAGS         more flags for dml train (e.g. "--bucket-mb 1 --overlap")
#   PYTHON [/usr/bin/python3]   a python3 with torch (Debian's, not pyenv's)
#   GEMM [1]          0: skip the reference run of gemm_shapes.py (OpenBLAS's
#                     single-call SGEMM at the step's shapes, one thread,
#                     through torch.mm), run once after the pairs
#   OPS [1]           0: skip the reference run of `dml bench ops` for a CNN
#                     (MODEL lenet5, or SIDE 32): each convolution shape
#                     alone, oneDNN's and dml's kernels, one thread, best of
#                     OPS_ROUNDS [3], at BATCH, run once after the pairs; the
#                     summary gives oneDNN's single-call GFLOP/s over a
#                     step's convolutions beside dml's achieved GFLOP/s
#   KEEP              a folder to keep the raw outputs in (default: a temp dir,
#                     removed at exit)
#
# Both sides run one compute thread per rank: OMP_NUM_THREADS,
# OPENBLAS_NUM_THREADS, MKL_NUM_THREADS = 1 (passed to the ranks with mpirun
# -x), torch.set_num_threads(1), and rank r pinned to core r (mpirun
# --bind-to core; os.sched_setaffinity in ddp_mlp.py). When NP exceeds the
# cores, neither side is pinned and mpirun gets --oversubscribe.
#
# samples/s is defined identically on both sides: per epoch, (samples trained
# on by all ranks together) / (rank 0's wall time from the start of the epoch
# to the end of its last step), excluding the test evaluation (dml:
# trainer/engine/loop.go, SamplesPerSec = seen / wall; ddp_mlp.py copies it). The
# "mean" column is the mean of the epochs' figures.
#
# GFLOP/s per rank = FLOPs per sample × samples/s / NP, where, for layer
# sizes s0 → s1 → … → sL (784 → 512 → 256 → 10 here),
#   FLOPs per sample = Σ_i 2·s_i·s_{i+1}          forward, X·Wᵀ
#                    + Σ_i 2·s_i·s_{i+1}          backward, weight gradient dYᵀ·X
#                    + Σ_{i≥1} 2·s_i·s_{i+1}      backward, input gradient dY·W
#                                                 (not for the first layer)
# = 2,407,424 for 784-512-256-10: the matrix products only (bias, ReLU,
# softmax, optimizer and AllReduce are not counted), over the whole step
# time (communication included), so it is a lower bound on the GEMM rate.
#
# Run it alone on the machine: on a shared machine wrap it in a lock, e.g.
#   flock /work/shared-notes/measure.lock bench/ddp/compare.sh /tmp/dml
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

MODEL=${MODEL:-mlp}
R=${R:-3}
EPOCHS=${EPOCHS:-3}
SAMPLES=${SAMPLES:-4096}
SIDE=${SIDE:-32}
NP=${NP:-2}
BATCH=${BATCH:-64}
HIDDEN=${HIDDEN:-512,256}
LR=${LR:-0.05}
MOMENTUM=${MOMENTUM:-0.9}
SEED=${SEED:-1}
PYTHON=${PYTHON:-/usr/bin/python3}
DML_BACKEND=${DML_BACKEND:-}
DML_FLAGS=${DML_FLAGS:-}

die() { echo "compare.sh: $*" >&2; exit 1; }

if [[ $# -gt 1 ]]; then die "usage: $0 [DML_BINARY]"; fi
if [[ $# -eq 1 ]]; then
	dml=$1
	built="given binary"
else
	make -C "$root" build >&2
	dml=$root/bin/dml
	built="make build of $(git -C "$root" describe --always --dirty 2>/dev/null || echo "?")"
fi
[[ -x $dml ]] || die "$dml: not an executable"
command -v mpirun >/dev/null || die "mpirun not found: apt-get install openmpi-bin (or make deps)"
"$PYTHON" -c 'import torch, torch.distributed' 2>/dev/null ||
	die "$PYTHON has no torch: apt-get install python3-torch, or set PYTHON"
[[ $R -ge 1 && $EPOCHS -ge 1 && $NP -ge 1 ]] || die "R, EPOCHS and NP must be ≥ 1"

if [[ -n ${KEEP:-} ]]; then
	out=$KEEP
	mkdir -p "$out"
else
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi

ncpu=$(nproc)
mpi=(mpirun -np "$NP" --mca btl self,vader)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
ddp_bind=()
if ((NP > ncpu)); then
	mpi+=(--oversubscribe --bind-to none)
	ddp_bind=(--no-bind)
else
	mpi+=(--bind-to core)
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
mpi+=(-x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x MKL_NUM_THREADS)
[[ -n ${OPENBLAS_CORETYPE:-} ]] && mpi+=(-x OPENBLAS_CORETYPE)

case $MODEL in
mlp) model_flags=(--model mlp --hidden "$HIDDEN") ;;
lenet5) model_flags=(--model lenet5) ;;
resnet20 | vgg16 | resnet50 | alexnet) model_flags=(--model "$MODEL") ;;
*) die "MODEL=$MODEL: want mlp, lenet5, resnet20, vgg16, resnet50 or alexnet" ;;
esac
data_flags=(--data fashion-mnist)
ddp_data=()
if [[ $MODEL != mlp && $MODEL != lenet5 ]]; then
	data_flags=(--data synthetic-images --shape "3x${SIDE}x${SIDE}" --classes 10 --samples "$SAMPLES")
	ddp_data=(--synthetic "$SAMPLES" --side "$SIDE")
fi
dml_cmd=("${mpi[@]}" "$dml" train "${model_flags[@]}" "${data_flags[@]}"
	--epochs "$EPOCHS" --batch "$BATCH" --lr "$LR" --momentum "$MOMENTUM" --seed "$SEED"
	--sync allreduce --progress never)
[[ -n $DML_BACKEND ]] && dml_cmd+=(--backend "$DML_BACKEND")
# shellcheck disable=SC2206 # DML_FLAGS is a list of flags, split on spaces
[[ -n $DML_FLAGS ]] && dml_cmd+=($DML_FLAGS)
ddp_cmd=("$PYTHON" "$here/ddp_mlp.py" --ranks "$NP" --epochs "$EPOCHS" --batch "$BATCH"
	"${model_flags[@]}" "${ddp_data[@]}" --lr "$LR" --momentum "$MOMENTUM" --seed "$SEED" "${ddp_bind[@]}")

echo "dml: ${dml_cmd[*]} --metrics FILE" >&2
echo "ddp: ${ddp_cmd[*]}" >&2
for ((r = 1; r <= R; r++)); do
	echo "== run $r/$R: dml" >&2
	"${dml_cmd[@]}" --metrics "$out/dml-$r.jsonl" >"$out/dml-$r.log" 2>&1 ||
		{ cat "$out/dml-$r.log" >&2; die "dml run $r failed"; }
	grep '^epoch' "$out/dml-$r.log" >&2 || true
	echo "== run $r/$R: ddp" >&2
	"${ddp_cmd[@]}" >"$out/ddp-$r.log" 2>&1 ||
		{ cat "$out/ddp-$r.log" >&2; die "ddp run $r failed"; }
	grep '^epoch' "$out/ddp-$r.log" >&2 || true
done

if [[ ${GEMM:-1} != 0 && $MODEL == mlp ]]; then
	echo "== reference: OpenBLAS SGEMM at the step's shapes" >&2
	"$PYTHON" "$here/gemm_shapes.py" --batch "$BATCH" --hidden "$HIDDEN" "${ddp_bind[@]}" >"$out/gemm.log" 2>&1 ||
		{ cat "$out/gemm.log" >&2; die "gemm_shapes.py failed"; }
fi

if [[ ${OPS:-1} != 0 && $MODEL != mlp && ( $MODEL == lenet5 || $SIDE == 32 ) ]]; then
	echo "== reference: dml bench ops (each convolution shape alone)" >&2
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$dml" bench ops --model "$MODEL" --batch "$BATCH" --rounds "${OPS_ROUNDS:-3}" >"$out/ops.log" 2>&1 ||
		{ cat "$out/ops.log" >&2; echo "dml bench ops failed: no single-call reference in the summary" >&2; rm -f "$out/ops.log"; }
fi

model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
dml_version=$("$dml" version 2>/dev/null || echo "dml ?")

"$PYTHON" - "$out" "$R" "$NP" "$HIDDEN" "$MODEL" "$SIDE" <<EOF
import json, sys
out, R, NP, hidden, model, side = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
sizes = [784] + [int(h) for h in hidden.split(",") if h] + [10]
pairs = list(zip(sizes, sizes[1:]))
flops = sum(2*a*b for a, b in pairs) * 2 + sum(2*a*b for a, b in pairs[1:])
title = f"MLP {'-'.join(map(str, sizes))}"
if model == "lenet5":
    # Each layer's product as a GEMM (convolutions as im2col: out ch ×
    # (in ch·k·k) × output pixels): forward, weight gradient, and the input
    # gradient of every layer but the first.
    layers = [(6, 1*5*5, 28*28), (16, 6*5*5, 10*10), (120, 400, 1), (84, 120, 1), (10, 84, 1)]
    prod = [2*o*k*p for o, k, p in layers]
    flops = 2*sum(prod) + sum(prod[1:])
    title = "LeNet-5"
# dml's Arch.TrainFLOPs on 3×32×32 (TestPresetSizes logs them; ResNet-20's pinned).
synthetic = {"resnet20": ("ResNet-20", 243_994_368), "vgg16": ("VGG-16", 1_878_816_768), "resnet50": ("ResNet-50", 7_783_440_384), "alexnet": ("AlexNet", 1_220_517_888)}
if model in synthetic:
    name, flops = synthetic[model]
    if side != 32:
        flops = 0  # GFLOP/s printed as 0: the counts above are for 32×32
    title = f"{name} (synthetic 3×{side}×{side} images: throughput only, the accuracies mean nothing)"

mean = lambda xs: sum(xs) / len(xs)

def dml_run(r):
    eps = [json.loads(l) for l in open(f"{out}/dml-{r}.jsonl") if l.strip()]
    return [e["samples_per_sec"] for e in eps], eps[-1]["test_acc"], eps[-1]["loss"], mean([e["comm_fraction"] for e in eps])

def ddp_run(r):
    res = None
    for l in open(f"{out}/ddp-{r}.log"):
        if l.startswith("RESULT "):
            res = json.loads(l[len("RESULT "):])
    eps = res["epochs"]
    return [e["samples_per_sec"] for e in eps], eps[-1]["test_acc"], eps[-1]["loss"], res["blas"]

rows, dmls, ddps, ratios, accs = [], [], [], [], []
blas = []
for r in range(1, R + 1):
    d, dacc, dloss, dcomm = dml_run(r)
    p, pacc, ploss, blas = ddp_run(r)
    dmls.append(mean(d)); ddps.append(mean(p)); ratios.append(mean(d) / mean(p)); accs.append((dacc, pacc))
    for name, sps, acc, loss, comm in (("dml", d, dacc, dloss, f"{100*dcomm:.1f}%"), ("DDP", p, pacc, ploss, "–")):
        rows.append(f"| {r} | {name} | " + " / ".join(f"{x:,.0f}" for x in sps) +
                    f" | {mean(sps):,.0f} | {acc:.4f} | {loss:.4f} | {flops*mean(sps)/NP/1e9:.2f} | {comm} | " +
                    (f"{ratios[-1]:.2f}×" if name == "dml" else "") + " |")
ne = len(d)
print(f"{title}, {'synthetic images' if model in synthetic else 'Fashion-MNIST'}, {NP} ranks, batch $BATCH per rank, "
      f"SGD momentum $MOMENTUM lr $LR, {ne} epoch{'s'[:ne>1]}, {R} run{'s'[:R>1]} each, alternating (dml first)\n")
print(f"| run | side | samples/s per epoch | mean samples/s | test acc | train loss (last epoch) | GFLOP/s per rank | AllReduce share | dml/DDP |")
print("|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print()
print(f"- dml mean samples/s: {min(dmls):,.0f}–{max(dmls):,.0f}; DDP: {min(ddps):,.0f}–{max(ddps):,.0f}")
print(f"- dml/DDP per run pair: " + ", ".join(f"{x:.2f}×" for x in ratios) +
      f"; ratio of the means: {mean(dmls)/mean(ddps):.2f}×")
print(f"- test accuracy after {ne} epoch{'s'[:ne>1]}, dml − DDP: " + ", ".join(f"{a-b:+.4f}" for a, b in accs))
print(f"- FLOPs per sample (matrix products, forward + backward): {flops:,}; "
      f"GFLOP/s per rank = FLOPs/sample × samples/s / {NP}")
try:
    g = None
    for l in open(f"{out}/gemm.log"):
        if l.startswith("RESULT "):
            g = json.loads(l[len("RESULT "):])
except OSError:
    g = None
if g:
    best = flops * mean(dmls) / NP / 1e9
    print(f"- OpenBLAS ({g['openblas_core']} kernels) single-call SGEMM at this step's shapes, 1 thread, through torch.mm: "
          f"{g['step_gflops']:.1f} GFLOP/s over a step's products ({g['step_gemm_sec']*1e6:.0f} µs per step of {g['batch']}, "
          f"≤ {g['gemm_bound_samples_per_sec_per_rank']:,.0f} samples/s per rank from GEMM alone); "
          f"dml's mean {best:.2f} GFLOP/s per rank is {100*best/g['step_gflops']:.0f}% of it "
          f"(gemm_shapes.py prints the per-shape table)")
import re
convs = []  # (count, dml ms, library ms, FLOPs of one call) per shape
try:
    for l in open(f"{out}/ops.log"):
        c = [x.strip() for x in l.split("|")]
        if len(c) == 9 and c[1] == "conv":
            m = re.search(r"\(\+(\d+) alike\)", c[2])
            convs.append((1 + int(m.group(1)) if m else 1, float(c[3]), float(c[5]), float(c[6]) * float(c[5]) * 1e6))
except OSError:
    pass
if convs and flops:
    f = sum(n*fl for n, _, _, fl in convs)
    lib = sum(n*l for n, _, l, _ in convs)
    best = sum(n*min(d, l) for n, d, l, _ in convs)
    got = flops * mean(dmls) / NP / 1e9
    print(f"- single-call reference (dml bench ops, each convolution shape alone, one thread, batch $BATCH, forward and both gradients): "
          f"the library {f/lib/1e6:.1f} GFLOP/s over a step's convolutions ({lib:.1f} ms), the faster of it and dml's kernels per shape "
          f"{f/best/1e6:.1f} GFLOP/s ({best:.1f} ms); dml's achieved mean {got:.2f} GFLOP/s per rank (the whole step, all products) "
          f"is {100*got/(f/best/1e6):.0f}% of the latter")
print(f"- AllReduce share: dml's comm_fraction (share of step time in the gradient AllReduce, mean over ranks and epochs)")
print(f"- DDP: torch gloo, BLAS mapped: {', '.join(blas)}")
EOF
echo "- machine: ${model:-?}, nproc $ncpu, OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}; $dml_version ($dml, $built), backend ${DML_BACKEND:-default}${DML_FLAGS:+, flags $DML_FLAGS}"
