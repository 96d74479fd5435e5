#!/bin/sh
# ps_sparse.sh BIN [BIN2] [ROUNDS]: an embedding-heavy network on byte text
# (a 4,096 × 64 untied token table, one GPT block, a linear head; 0.33M
# weights, 79% of them in the table) under --sync ps, 1 server and 2
# workers, batch 16 × 64 tokens, AdamW, 60 steps; BIN and BIN2 alternate,
# ROUNDS times (default 2). Each run prints its lines and the first
# worker's metrics: push_bytes and bytes_received (the pulls' weights),
# the loss. A dml with sparse pulls and pushes (issue 33) sends the rows
# each batch names; one without sends the whole model each step. Byte
# text names at most 256 of the table's rows (about 75 a batch): the
# table stands in for a large vocabulary of which a batch names few.
#
# ARGS1 and ARGS2 are added to BIN's and BIN2's train command lines: one
# dml against itself with ARGS2="--sparse-rows off" compares the two ways.
# LINK=1gbit (or any bench/cluster link spec) runs each job on a test
# cluster of 3 hosts, one rank each, over TCP on links of that rate
# (bench/cluster/run.sh; needs root); unset, the 3 ranks share this
# machine's memory.
set -eu
bin=${1:?usage: ps_sparse.sh BIN [BIN2] [ROUNDS]}
bin2=${2:-}
rounds=${3:-2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
"$here/gocorpus.sh" "$dir/go.txt" 2 1
cat > "$dir/emb.yaml" <<'YAML'
layers:
  - {kind: embedding, name: wte, rows: 4096, out: 64, std: 0.02}
  - {kind: posembed, name: wpe, rows: 64}
  - {kind: gptblock, name: h.0, heads: 4, rows: 1, std: 0.02}
  - {kind: layernorm, name: ln_f}
  - {kind: linear, name: lm_head, out: 256}
YAML
mpi="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
[ -n "${LINK:-}" ] && mpi="$here/../cluster/run.sh --hosts 3 --link $LINK --name dmlsp --"
r=1
while [ "$r" -le "$rounds" ]; do
  for k in 1 2; do
    b=$bin args=${ARGS1:-}
    if [ "$k" = 2 ]; then
      [ -n "$bin2" ] || continue
      b=$bin2 args=${ARGS2:-}
    fi
    echo "## round $r: $b $args"
    rm -f "$dir/m.jsonl"
    $mpi -np 3 "$b" train --model-file "$dir/emb.yaml" --data text --train "$dir/go.txt" \
      --test "$dir/go.txt.test" --seq-len 64 --sync ps --servers 1 --batch 16 \
      --optimizer adamw --lr 1e-3 --max-steps 60 --epochs 1 --metrics "$dir/m.jsonl" $args 2>&1 |
      grep -E '^(training|epoch|done|ps:)' || true
    sed -e 's/.*"loss":\([^,]*\).*"test_loss":\([^,]*\).*"samples_per_sec":\([^,]*\).*/metrics: loss \1  test_loss \2  samples\/s \3/' "$dir/m.jsonl"
    grep -o '"push_bytes":[0-9]*\|"bytes_received":[0-9]*\|"bytes_sent":[0-9]*' "$dir/m.jsonl" | tr '\n' ' '
    echo
  done
  r=$((r + 1))
done
