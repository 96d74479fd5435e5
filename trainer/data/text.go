package data

import (
	"io"
	"math"

	"github.com/dml-project/dml/internal/regfile"
)

// TextVocab is a byte-level text's vocabulary: each byte is a token.
const TextVocab = 256

// MaxTextBytes bounds a text file LoadText reads (1 GiB: as float32
// windows it takes about four times as much memory).
const MaxTextBytes = 1 << 30

// LoadText reads a text file as a byte-level token stream (vocabulary
// 256, no tokenizer) cut into windows of seqLen+1 tokens: window k holds
// bytes [k·seqLen, k·seqLen+seqLen+1), a sequence of seqLen inputs whose
// targets are the same bytes one further on, so consecutive windows share
// one byte and every byte but the first is a target once. Each window is
// a row of the Dense (Cols seqLen+1, tokens as float32, labels 0 and
// unused; Image {1, 1, 1, T: seqLen}); a rank's shard is a set of windows.
// An empty file, one shorter than a window, or one that is not a regular
// file is refused (ErrFormat, or regfile's error), naming the file.
func LoadText(path string, seqLen int) (*Dense, error) {
	if seqLen <= 0 {
		return nil, errorf(ErrConfig, "%s: sequence length %d must be positive", path, seqLen)
	}
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTextBytes+1))
	if err != nil {
		return nil, errorf(ErrFormat, "%s: %v", path, err)
	}
	return TextWindows(path, b, seqLen)
}

// TextWindows cuts text (named name in errors) into LoadText's windows.
func TextWindows(name string, text []byte, seqLen int) (*Dense, error) {
	switch {
	case len(text) > MaxTextBytes:
		return nil, errorf(ErrTooLarge, "%s: more than %d bytes of text", name, MaxTextBytes)
	case len(text) == 0:
		return nil, errorf(ErrFormat, "%s: empty: a text needs at least one window of %d bytes (--seq-len + 1)", name, seqLen+1)
	case len(text) < seqLen+1:
		return nil, errorf(ErrFormat, "%s: %d bytes, shorter than one window of %d (--seq-len + 1): lower --seq-len or give a longer text", name, len(text), seqLen+1)
	case seqLen >= math.MaxInt32:
		return nil, errorf(ErrConfig, "%s: sequence length %d too long", name, seqLen)
	}
	rows, cols := TextWindowCount(len(text), seqLen), seqLen+1
	d := &Dense{X: make([]float32, rows*cols), Y: make([]int32, rows), Rows: rows, Cols: cols,
		Classes: TextVocab, Image: Shape{C: 1, H: 1, W: 1, T: seqLen}}
	for r := range rows {
		for i, c := range text[r*seqLen : r*seqLen+cols] {
			d.X[r*cols+i] = float32(c)
		}
	}
	return d, nil
}

// TextWindowCount is how many windows TextWindows cuts from n bytes: one
// every seqLen bytes, each seqLen+1 long (the next one starts at its last
// byte, its target).
func TextWindowCount(n, seqLen int) int { return (n - 1) / seqLen }
