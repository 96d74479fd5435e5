package data

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/dml-project/dml/internal/crash"
	"github.com/dml-project/dml/trainer/internal/inflate"

	"github.com/dml-project/dml/internal/regfile"
)

// IDX is the file format of MNIST and Fashion-MNIST (LeCun et al.):
//
//	offset 0: 0x00 0x00        magic
//	offset 2: type             0x08 unsigned byte, 0x09 signed byte, 0x0B int16,
//	                           0x0C int32, 0x0D float32, 0x0E float64
//	offset 3: ndims            number of dimensions
//	offset 4: ndims × uint32   dimension sizes, big-endian, slowest first
//	then:     the data         product(dims) elements, row-major, big-endian
//
// Files may be gzip-compressed; readers here detect gzip by its magic bytes
// (0x1f 0x8b), not by the file name. Only the unsigned-byte type is read.

// IDXUnsignedByte is the IDX type code of unsigned-byte data, the only type
// this package reads.
const IDXUnsignedByte = 0x08

// MaxIDXBytes is the largest IDX payload (product of the dimensions) this
// package accepts.
const MaxIDXBytes = 1 << 32

// maxIDXDims bounds the dimension count a header may declare.
const maxIDXDims = 16

var idxTypeNames = map[byte]string{
	0x08: "unsigned byte", 0x09: "signed byte", 0x0B: "int16",
	0x0C: "int32", 0x0D: "float32", 0x0E: "float64",
}

// IDX is a parsed IDX file: its type code, its dimensions (slowest first) and
// its payload of product(Dims) bytes.
type IDX struct {
	Type byte
	Dims []int
	Data []byte
}

// IDXImages is an IDX image file scaled to float32: Count images of
// product(Shape) pixels each, row-major, every pixel byte p stored as p/255.
type IDXImages struct {
	Count  int
	Shape  []int // per-image dimensions, e.g. [28 28]
	Pixels []float32
}

// Features is the number of values per image, the product of Shape.
func (im *IDXImages) Features() int {
	n := 1
	for _, d := range im.Shape {
		n *= d
	}
	return n
}

// ParseIDX reads one IDX file of unsigned bytes, raw or gzip, from r. It
// checks the magic, the type, that the dimensions are sane and that r holds
// exactly the declared payload: fewer bytes or any byte after it is an error
// matching ErrFormat. A payload over MaxIDXBytes matches ErrTooLarge. Memory
// grows with the bytes actually read, not with what the header claims.
//
// When r knows its size (an *os.File, a *bytes.Reader: anything with
// Stat or Size), the header is checked against it before any data is read:
// a raw file must hold the declared payload, and a gzip file may not claim
// more than inflate.Limit of its size (a gzip bomb). Without a known size
// the gzip stream is bounded as it is read (see maybeGunzip).
func ParseIDX(r io.Reader) (*IDX, error) {
	src, dims, size, err := openIDX(r)
	if err != nil {
		return nil, err
	}
	data, err := readAtMost(src, size+1)
	n := int64(len(data))
	switch {
	case errors.Is(err, ErrTooLarge):
		return nil, fmt.Errorf("dimensions %s declare %d bytes: %w", dimString(dims), size, err)
	case err != nil:
		return nil, readErr(err, "truncated or unreadable data: dimensions %s declare %d bytes, read %d before an error", dimString(dims), size, n)
	case n < size:
		return nil, errorf(ErrFormat, "truncated data: dimensions %s declare %d bytes, found %d", dimString(dims), size, n)
	case n > size:
		return nil, errorf(ErrFormat, "trailing data: dimensions %s declare %d bytes, found more", dimString(dims), size)
	}
	return &IDX{Type: IDXUnsignedByte, Dims: dims, Data: data}, nil
}

// openIDX reads and checks an IDX header (see ParseIDX) and returns the
// stream positioned at the payload, the dimensions and the payload's size.
func openIDX(r io.Reader) (src io.Reader, dims []int, size int64, err error) {
	input := inputSize(r)
	src, gz, err := maybeGunzip(r)
	if err != nil {
		return nil, nil, 0, err
	}
	var head [4]byte
	if n, err := io.ReadFull(src, head[:]); err != nil {
		return nil, nil, 0, readErr(err, "truncated header: want 4 magic bytes, found %d", n)
	}
	if head[0] != 0 || head[1] != 0 || head[3] == 0 || head[3] > maxIDXDims {
		return nil, nil, 0, errorf(ErrFormat, "bad magic %#08x: an IDX file starts 0x00 0x00, a type byte and a dimension count in 1..%d",
			binary.BigEndian.Uint32(head[:]), maxIDXDims)
	}
	if t := head[2]; t != IDXUnsignedByte {
		if name, ok := idxTypeNames[t]; ok {
			return nil, nil, 0, errorf(ErrFormat, "IDX data type %#02x (%s) is not supported, only %#02x (unsigned byte)", t, name, IDXUnsignedByte)
		}
		return nil, nil, 0, errorf(ErrFormat, "unknown IDX data type %#02x", t)
	}
	ndims := int(head[3])
	dimBytes := make([]byte, 4*ndims)
	if n, err := io.ReadFull(src, dimBytes); err != nil {
		return nil, nil, 0, readErr(err, "truncated header: %d dimensions need %d bytes after the magic, found %d", ndims, 4*ndims, n)
	}
	dims = make([]int, ndims)
	size = int64(1)
	for i := range dims {
		dims[i] = int(binary.BigEndian.Uint32(dimBytes[4*i:]))
		if dims[i] != 0 && size > MaxIDXBytes/int64(dims[i]) {
			return nil, nil, 0, errorf(ErrTooLarge, "dimensions %s exceed %d bytes", dimString(dims[:i+1]), int64(MaxIDXBytes))
		}
		size *= int64(dims[i])
	}
	if input >= 0 {
		header := int64(4 + 4*ndims)
		switch {
		case !gz && size > input-header:
			return nil, nil, 0, errorf(ErrFormat, "truncated data: dimensions %s declare %d bytes, found %d (the file is smaller than its header claims)",
				dimString(dims), size, max(0, input-header))
		case gz && size > inflate.Limit(input):
			return nil, nil, 0, errorf(ErrTooLarge, "dimensions %s declare %d bytes, more than a gzip file of %d bytes can justify: %s",
				dimString(dims), size, input, inflate.Reason(input))
		}
	}
	return src, dims, size, nil
}

// ParseIDXImages parses an IDX file of at least two dimensions (count, then
// the per-image shape, each positive) from r and scales its bytes to [0, 1].
func ParseIDXImages(r io.Reader) (*IDXImages, error) {
	f, err := ParseIDX(r)
	if err != nil {
		return nil, fmt.Errorf("IDX images: %w", err)
	}
	if len(f.Dims) < 2 {
		return nil, errorf(ErrFormat, "IDX images: %d dimension(s) %s, want count × image shape", len(f.Dims), dimString(f.Dims))
	}
	features := 1
	for _, d := range f.Dims[1:] {
		if d == 0 {
			return nil, errorf(ErrFormat, "IDX images: dimensions %s: image dimensions must be positive", dimString(f.Dims))
		}
		if features > MaxIDXBytes/d { // possible only with zero images
			return nil, errorf(ErrTooLarge, "IDX images: dimensions %s: one image exceeds %d bytes", dimString(f.Dims), int64(MaxIDXBytes))
		}
		features *= d
	}
	px := make([]float32, len(f.Data))
	scaleBytes(px, f.Data)
	return &IDXImages{Count: f.Dims[0], Shape: f.Dims[1:], Pixels: px}, nil
}

// ParseIDXLabels parses a one-dimensional IDX label file from r. With
// classes > 0 every label must be below classes; with classes == 0 any byte
// is a label.
func ParseIDXLabels(r io.Reader, classes int) ([]int32, error) {
	f, err := ParseIDX(r)
	if err != nil {
		return nil, fmt.Errorf("IDX labels: %w", err)
	}
	if len(f.Dims) != 1 {
		return nil, errorf(ErrFormat, "IDX labels: %d dimensions %s, want 1", len(f.Dims), dimString(f.Dims))
	}
	y := make([]int32, len(f.Data))
	for i, b := range f.Data {
		if classes > 0 && int(b) >= classes {
			return nil, errorf(ErrFormat, "IDX labels: label %d of sample %d is out of range [0, %d)", b, i, classes)
		}
		y[i] = int32(b)
	}
	return y, nil
}

// ReadIDXImages reads an IDX image file (raw or gzip) with ParseIDXImages;
// errors name the file.
func ReadIDXImages(path string) (*IDXImages, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	im, err := ParseIDXImages(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return im, nil
}

// ReadIDXLabels reads an IDX label file (raw or gzip) with ParseIDXLabels;
// errors name the file.
func ReadIDXLabels(path string, classes int) ([]int32, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	y, err := ParseIDXLabels(f, classes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return y, nil
}

// LoadIDXPair reads an image file and its label file into a Dense with one
// row per image (Cols = pixels per image). The counts must match. classes > 0
// fixes the class count and bounds the labels; classes == 0 takes it as the
// largest label + 1.
func LoadIDXPair(imagesPath, labelsPath string, classes int) (*Dense, error) {
	var (
		y    []int32
		yErr error
		done = make(chan struct{})
		pan  *crash.Panic
	)
	go func() {
		defer close(done)
		defer crash.Capture(&pan) // raised again below, on the caller
		y, yErr = ReadIDXLabels(labelsPath, classes)
	}()
	im, err := ReadIDXImages(imagesPath)
	<-done
	crash.Repanic(pan)
	if err != nil {
		return nil, err
	}
	if yErr != nil {
		return nil, yErr
	}
	if im.Count != len(y) {
		return nil, errorf(ErrFormat, "%s holds %d images but %s holds %d labels", imagesPath, im.Count, labelsPath, len(y))
	}
	if classes == 0 {
		for _, l := range y {
			classes = max(classes, int(l)+1)
		}
	}
	return &Dense{X: im.Pixels, Y: y, Rows: im.Count, Cols: im.Features(), Classes: classes}, nil
}

// byteScale[b] is b/255 as a float32.
var byteScale = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i) / 255
	}
	return t
}()

// readAtMost reads r until io.EOF or limit bytes. Its buffer starts small
// and doubles (never past limit), so memory follows the bytes that arrive,
// whatever a header claims.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	buf := make([]byte, 0, min(limit, 1<<20))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), limit-int64(len(buf)))))
		}
		n, err := r.Read(buf[len(buf):int(min(int64(cap(buf)), limit))])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// scaleBytes sets dst[i] = src[i]/255, splitting large inputs among
// GOMAXPROCS goroutines (the work is mostly first touches of fresh memory).
func scaleBytes(dst []float32, src []byte) {
	const chunk = 1 << 20
	scale := func(dst []float32, src []byte) {
		for i, b := range src {
			dst[i] = byteScale[b]
		}
	}
	workers := min(runtime.GOMAXPROCS(0), (len(src)+chunk-1)/chunk)
	if workers <= 1 {
		scale(dst, src)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(src)/workers, (w+1)*len(src)/workers
		wg.Go(func() { scale(dst[lo:hi:hi], src[lo:hi:hi]) })
	}
	wg.Wait()
}

// maybeGunzip returns r, or a gzip reader over it when it starts with the
// gzip magic bytes (then gz is true). The gzip reader is bounded: once it
// has produced more than inflate.Limit of the compressed bytes consumed so
// far, it fails with an error matching ErrTooLarge, so a gzip bomb costs at
// most about inflate.Floor bytes, or MaxRatio times its own size.
func maybeGunzip(r io.Reader) (src io.Reader, gz bool, err error) {
	in := &countingReader{r: r}
	br := bufio.NewReaderSize(in, 32<<10)
	magic, _ := br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return br, false, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, true, readErr(err, "gzip header")
	}
	return &gzipReader{r: zr, in: in}, true, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// gzipReader prefixes gzip's errors (except io.EOF, which readers must
// return bare) with "gzip stream", so a truncated .gz says so, and stops a
// stream that decompresses beyond inflate.Limit of its input so far.
type gzipReader struct {
	r   io.Reader
	in  *countingReader // the compressed input, counted
	out int64           // bytes decompressed
}

func (g *gzipReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	g.out += int64(n)
	if limit := inflate.Limit(g.in.n); g.out > limit {
		return n, errorf(ErrTooLarge, "gzip stream: more than %d bytes decompressed from %d compressed bytes: %s", limit, g.in.n, inflate.Reason(g.in.n))
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("gzip stream: %w", err)
	}
	return n, err
}

// inputSize is r's size in bytes when r can tell (Stat, as *os.File; Size,
// as *bytes.Reader and *strings.Reader), else -1.
func inputSize(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Stat() (fs.FileInfo, error) }:
		if st, err := v.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
	case interface{ Size() int64 }:
		return v.Size()
	}
	return -1
}

// readErr wraps a read error: an early end of input or corrupt gzip/deflate
// data also matches ErrFormat, other errors (I/O) keep only their own chain.
func readErr(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var corrupt flate.CorruptInputError
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt) {
		return errorf(ErrFormat, "%s: %w", msg, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// dimString writes dims as "60000×28×28".
func dimString(dims []int) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = fmt.Sprint(d)
	}
	return strings.Join(s, "×")
}
