#!/bin/sh
# gocorpus.sh OUT [MB] [TEST_MB]: a byte-level text corpus every machine
# with Go has — the Go toolchain's own sources ($(go env GOROOT)/src,
# *.go, tests left out), concatenated in sorted path order, so that the
# same toolchain gives the same bytes. OUT gets the first MB megabytes
# (default 8) and OUT.test the next TEST_MB (default 1): the training and
# test files of `dml train --model gpt --data text --train OUT --test
# OUT.test`.
set -eu
out=${1:?usage: gocorpus.sh OUT [MB] [TEST_MB]}
mb=${2:-8}
test_mb=${3:-1}
root=$(go env GOROOT)/src
[ -d "$root" ] || { echo "gocorpus.sh: no Go sources at $root" >&2; exit 2; }
tmp=$out.all.$$
trap 'rm -f "$tmp"' EXIT
find "$root" -name '*.go' ! -name '*_test.go' ! -path '*/testdata/*' | LC_ALL=C sort | xargs cat > "$tmp"
total=$(wc -c < "$tmp")
want=$(( (mb + test_mb) * 1048576 ))
[ "$total" -ge "$want" ] || { echo "gocorpus.sh: the sources hold $total bytes, fewer than $want" >&2; exit 2; }
head -c $(( mb * 1048576 )) "$tmp" > "$out"
tail -c +$(( mb * 1048576 + 1 )) "$tmp" | head -c $(( test_mb * 1048576 )) > "$out.test"
echo "$out: $(wc -c < "$out") bytes; $out.test: $(wc -c < "$out.test") bytes (Go $(go env GOVERSION) sources)"
