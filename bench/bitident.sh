#!/usr/bin/env bash
# bitident.sh — a refactor proves itself bit for bit (docs/CONTRIBUTING.md, conventions 16):
# runs two dml binaries with the same flags under mpirun and compares the
# --save weights byte for byte, then (unless QUICK=1) runs the `make demo`
# job with both and compares every printed accuracy.
#
#   bench/bitident.sh OLD NEW        e.g. bench/bitident.sh /tmp/dml-old bin/dml
#
# NEW_FLAGS (optional) go to the new binary only: settings whose defaults
# changed on purpose, e.g. NEW_FLAGS="--backend cpu --bucket-mb 0" (the
# pure-Go backend, one gradient bucket: what dml did before issue 9), or
# NEW_FLAGS="--kernels dml" against a binary from before the libraries
# (issue 30: oneDNN's GEMM serves the MLP cases under --kernels auto).
#
# OLD is built from the commit before the change under test:
#   git worktree add /tmp/old <commit> && (cd /tmp/old && go build -o /tmp/dml-old ./cmd/dml)
# Exit status: 0 when every case matches, 1 otherwise.
set -u
old=${1:?usage: bitident.sh OLD NEW}
new=${2:?usage: bitident.sh OLD NEW}
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader)
dir=$(mktemp -d /tmp/bitident.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
short=(--epochs 1 --max-steps 50)
sparse=(--model sparse-logreg --data synthetic-sparse --features 100000 --nnz 20 --samples 10000 --optimizer adagrad --lr 0.5)
synth=(--data synthetic --samples 3000 --features 20 --classes 4 --shuffle)
# The networks (issue 32): our own kernels, so that the bytes are the
# reference's (a library's convolutions are deterministic run to run, not
# across builds of the library).
lenet=(--model lenet5 --data synthetic-images --shape 1x28x28 --classes 10 --samples 512 --batch 32 --kernels dml)
resnet=(--model resnet20 --data synthetic-images --shape 3x32x32 --classes 10 --samples 256 --batch 16 --kernels dml)
cat >"$dir/bn.yaml" <<'YAML'
layers:
  - {kind: conv, name: conv1, out: 4, kernel: 3, pad: 1}
  - {kind: batchnorm, name: bn1}
  - {kind: relu}
  - {kind: maxpool, kernel: 2}
  - {kind: block, name: layer1.0, out: 8, stride: 2}
  - {kind: avgpool}
  - {kind: flatten}
  - {kind: linear, name: fc, out: 10}
YAML
netfile=(--model-file "$dir/bn.yaml" --data synthetic-images --shape 1x28x28 --classes 10 --samples 512 --batch 32 --kernels dml)
# The transformer and the seeds' networks (issue 33): layer norm, attention,
# GELU, embeddings; AlexNet's local response norm and dropout. The text is
# this script's own bytes: the same file for both binaries.
cat "${BASH_SOURCE[0]}" >"$dir/text.txt"
gpt=(--model gpt --layers 2 --heads 2 --embed 32 --seq-len 32 --data text --train "$dir/text.txt" --batch 8 --optimizer adamw --lr 0.001 --kernels dml)
alexnet=(--model alexnet --data synthetic-images --shape 3x32x32 --classes 10 --samples 64 --batch 8 --kernels dml)

# name | ranks | flags
cases=(
	"allreduce-2|2|${short[*]}"
	"allreduce-4|4|${short[*]}"
	"allreduce-2-adagrad-ring|2|${short[*]} --optimizer adagrad --lr 0.01 --allreduce ring"
	"allreduce-3-sgd-tree-synthetic|3|--epochs 2 --optimizer sgd --allreduce tree --hidden 32 ${synth[*]}"
	"allreduce-2-logreg|2|--epochs 2 --model logreg --data synthetic --samples 2000 --features 10 --classes 2"
	"ps-bsp-1server|3|${short[*]} --sync ps --servers 1 --consistency bsp"
	"ps-bsp-2servers|4|${short[*]} --sync ps --servers 2 --consistency bsp"
	"ps-bsp-2servers-adagrad-synthetic|4|--epochs 2 --sync ps --servers 2 --consistency bsp --optimizer adagrad --lr 0.05 --hidden 32 ${synth[*]}"
	"sparse-logreg-bsp-1server|3|--epochs 1 --max-steps 50 --sync ps --consistency bsp ${sparse[*]}"
	"sparse-logreg-bsp-2servers|4|--epochs 1 --sync ps --servers 2 --consistency bsp ${sparse[*]}"
	"dpsgd-4|4|${short[*]} --sync dpsgd"
	"dpsgd-3-adagrad-synthetic|3|--epochs 2 --sync dpsgd --optimizer adagrad --lr 0.05 --hidden 32 ${synth[*]}"
	"lenet5-2|2|--epochs 1 --max-steps 8 ${lenet[*]}"
	"resnet20-2|2|--epochs 1 --max-steps 4 ${resnet[*]}"
	"netfile-bn-2|2|--epochs 2 ${netfile[*]}"
	"netfile-bn-2-adam|2|--epochs 1 --optimizer adam --lr 0.001 ${netfile[*]}"
	"lenet5-2-lars|2|--epochs 1 --max-steps 8 --optimizer lars --lr 0.1 ${lenet[*]}"
	"lenet5-2-localsgd|2|--epochs 1 --max-steps 8 --local-steps 4 ${lenet[*]}"
	"netfile-bn-2-bf16-compress|2|--epochs 1 --compress bf16 ${netfile[*]}"
	"lenet5-ps-2servers|4|--epochs 1 --max-steps 8 --sync ps --servers 2 --consistency bsp ${lenet[*]}"
	"gpt-2|2|--epochs 1 --max-steps 6 ${gpt[*]}"
	"alexnet-2|2|--epochs 1 --max-steps 3 ${alexnet[*]}"
)
# A binary from before --kernels (issue 30) had dml's own kernels only:
# it runs the cases without the flag. A case whose model or flag the old
# binary lacks is skipped, and says so.
old_kernels=1
"$old" train --help 2>&1 | grep -q -- '-kernels' || old_kernels=0
for c in "${cases[@]}"; do
	IFS='|' read -r name np flags <<<"$c"
	read -r -a args <<<"$flags"
	for which in old new; do
		bin=$old extra=() run=("${args[@]}")
		[ $which = new ] && bin=$new && read -r -a extra <<<"${NEW_FLAGS:-}"
		if [ $which = old ] && [ $old_kernels = 0 ]; then
			run=()
			for ((i = 0; i < ${#args[@]}; i++)); do
				if [ "${args[i]}" = --kernels ]; then i=$((i + 1)); else run+=("${args[i]}"); fi
			done
		fi
		if ! "${mpirun[@]}" -np "$np" "$bin" train "${run[@]}" "${extra[@]}" --save "$dir/$name.$which.npz" >"$dir/$name.$which.out" 2>&1; then
			if [ $which = old ] && grep -q 'flag provided but not defined\|unknown model\|is not a model' "$dir/$name.old.out"; then
				echo "skip  $name: the old binary cannot run it ($(grep -m1 -o 'flag provided but not defined: [^ ]*\|unknown model "[^"]*"\|[^ ]* is not a model' "$dir/$name.old.out"))"
				continue 2
			fi
			echo "FAIL $name: $which binary failed:"
			tail -5 "$dir/$name.$which.out"
			fail=1
			continue 2
		fi
	done
	if cmp -s "$dir/$name.old.npz" "$dir/$name.new.npz"; then
		echo "same  $name (np $np): $(sha256sum <"$dir/$name.new.npz" | cut -c1-16)  $(grep -o 'test accuracy [0-9.]*' "$dir/$name.new.out")"
	else
		echo "FAIL  $name (np $np): the saved weights differ"
		fail=1
	fi
done

if [ "${QUICK:-0}" != 1 ]; then
	# The `make demo` job: every epoch's test accuracy and the final one.
	demo=(--model mlp --hidden 256,128 --data fashion-mnist --epochs 5 --batch 64 --lr 0.05 --sync allreduce)
	for which in old new; do
		bin=$old extra=()
		[ $which = new ] && bin=$new && read -r -a extra <<<"${NEW_FLAGS:-}"
		"${mpirun[@]}" -np 2 "$bin" train "${demo[@]}" "${extra[@]}" --save "$dir/demo.$which.npz" >"$dir/demo.$which.out" 2>&1 || {
			echo "FAIL demo: $which binary failed"
			tail -5 "$dir/demo.$which.out"
			fail=1
		}
		grep -o 'test_acc [0-9.]*\|test accuracy [0-9.]*' "$dir/demo.$which.out" >"$dir/demo.$which.acc"
	done
	if cmp -s "$dir/demo.old.acc" "$dir/demo.new.acc" && cmp -s "$dir/demo.old.npz" "$dir/demo.new.npz"; then
		echo "same  demo (np 2, 5 epochs): accuracies $(tr '\n' ' ' <"$dir/demo.new.acc")and weights"
	else
		echo "FAIL  demo: accuracies or weights differ"
		paste "$dir/demo.old.acc" "$dir/demo.new.acc"
		fail=1
	fi
fi
exit $fail
