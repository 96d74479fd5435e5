package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/dml-project/dml/trainer/data"
)

// DataConfig says where the training and test sets come from.
type DataConfig struct {
	// Name: fashion-mnist, idx, libsvm or synthetic.
	Name string `json:"name"`
	// Dir is Fashion-MNIST's folder (data.DefaultFashionMNISTDir if empty).
	Dir string `json:"dir"`
	// Train and Test: for idx "IMAGES,LABELS" (raw or gzip), for libsvm a
	// file each (Test optional: then a tenth of Train is held out).
	Train string `json:"train"`
	Test  string `json:"test"`
	// Synthetic data: Samples training rows (plus a quarter as many test
	// rows), Features columns, Classes classes, Gaussian Noise.
	Samples  int     `json:"samples"`
	Features int     `json:"features"`
	Classes  int     `json:"classes"`
	Noise    float64 `json:"noise"`
	// Shape is synthetic-images' image shape, "CxHxW" (data.ParseShape;
	// "": DefaultImageShape).
	Shape string `json:"shape,omitempty"`
	// NNZ is synthetic-sparse's nonzeros per row (features drawn with
	// power-law frequencies; binary labels from a hidden logistic model).
	NNZ int `json:"nnz"`
	// MaxFeatures raises (or lowers) the largest LIBSVM feature index
	// accepted; 0 means data.DefaultMaxFeatures of the file's size.
	MaxFeatures int `json:"max_features,omitempty"`
	// ExpectClasses, for idx and libsvm data, is the number of classes the
	// data must have (the command line's --classes, given): data from which
	// another count is inferred (a corrupt label, a missing class) is
	// refused, saying what was inferred. 0: any.
	ExpectClasses int `json:"expect_classes,omitempty"`
	// Labels fixes a LIBSVM file's classes: label Labels[k] is class k, and
	// a label not in it is an error (dml eval passes the labels a saved
	// model was trained with). nil: inferred from the training file.
	Labels []int64 `json:"-"`
	// SeqLen is text's sequence length: the tokens a sample's window
	// feeds the model (the window holds one more, the last target; 0:
	// DefaultSeqLen).
	SeqLen int `json:"seq_len,omitempty"`
	// Cache is a folder for inflated copies of gzip IDX image files
	// (fashion-mnist, idx), read in their place by later runs
	// (data.IDXSource.WithCache; --data-cache). "": none. The same
	// bytes: not compared between ranks.
	Cache string `json:"-"`
}

// openCIFAR opens CIFAR-10's or CIFAR-100's files in Dir (cifar100: the
// fine labels; cifar100-coarse: the 20 superclasses).
func (d DataConfig) openCIFAR() (train, test *data.CIFARSource, err error) {
	if d.Name == "cifar10" {
		return data.OpenCIFAR10(d.Dir)
	}
	return data.OpenCIFAR100(d.Dir, d.Name == "cifar100-coarse")
}

// DataNames lists the data sources.
var DataNames = []string{"fashion-mnist", "cifar10", "cifar100", "cifar100-coarse", "idx", "libsvm", "text", "synthetic", "synthetic-images", "synthetic-sparse"}

// DefaultSeqLen is text's sequence length when none is given.
const DefaultSeqLen = 128

// MaxSeqLen bounds text's sequence length (attention keeps seq² values per
// head and sample).
const MaxSeqLen = 1 << 14

// EffectiveSeqLen is text's sequence length: SeqLen, or DefaultSeqLen.
func (d DataConfig) EffectiveSeqLen() int {
	if d.SeqLen > 0 {
		return d.SeqLen
	}
	return DefaultSeqLen
}

// TextShape is a text's samples' shape: a sequence of seqLen tokens.
func (d DataConfig) TextShape() data.Shape {
	return data.Shape{C: 1, H: 1, W: 1, T: d.EffectiveSeqLen()}
}

// Validate reports a bad data setting as a *ConfigError.
func (d DataConfig) Validate() error {
	if err := finiteFloats(reflect.ValueOf(d), "Data"); err != nil {
		return err
	}
	switch d.Name {
	case "fashion-mnist", "cifar10", "cifar100", "cifar100-coarse":
	case "idx":
		if len(strings.Split(d.Train, ",")) != 2 {
			return Bad("Data.Train", "IMAGES,LABELS is needed with data idx (and optionally a test set, IMAGES,LABELS)")
		}
		if d.Test != "" && len(strings.Split(d.Test, ",")) != 2 {
			return Bad("Data.Test", "%q: want IMAGES,LABELS", d.Test)
		}
	case "libsvm":
		if d.Train == "" {
			return Bad("Data.Train", "FILE is needed with data libsvm (and optionally a test FILE)")
		}
	case "text":
		switch {
		case d.Train == "":
			return Bad("Data.Train", "FILE is needed with data text (any file: its bytes are the tokens; optionally a test FILE)")
		case d.SeqLen < 0 || d.SeqLen > MaxSeqLen:
			return Bad("Data.SeqLen", "%d must be in 1..%d (0: %d)", d.SeqLen, MaxSeqLen, DefaultSeqLen)
		}
		if d.MaxFeatures < 0 {
			return Bad("Data.MaxFeatures", "%d must not be negative (0: the default limit)", d.MaxFeatures)
		}
	case "synthetic":
		switch {
		case d.Samples <= 0:
			return Bad("Data.Samples", "%d must be greater than 0", d.Samples)
		case d.Features <= 0:
			return Bad("Data.Features", "%d must be greater than 0", d.Features)
		case d.Classes < 2:
			return Bad("Data.Classes", "%d must be at least 2", d.Classes)
		case !(d.Noise >= 0):
			return Bad("Data.Noise", "%v must not be negative", d.Noise)
		}
	case "synthetic-images":
		if _, err := d.ImageShape(); err != nil {
			return Bad("Data.Shape", "%v", err)
		}
		switch {
		case d.Samples <= 0:
			return Bad("Data.Samples", "%d must be greater than 0", d.Samples)
		case d.Classes < 2:
			return Bad("Data.Classes", "%d must be at least 2", d.Classes)
		case !(d.Noise >= 0):
			return Bad("Data.Noise", "%v must not be negative", d.Noise)
		}
	case "synthetic-sparse":
		switch {
		case d.Samples <= 0:
			return Bad("Data.Samples", "%d must be greater than 0", d.Samples)
		case d.Features <= 0 || d.Features > data.MaxSyntheticFeatures:
			return Bad("Data.Features", "%d must be in 1..%d", d.Features, data.MaxSyntheticFeatures)
		case d.NNZ <= 0 || d.NNZ > d.Features:
			return Bad("Data.NNZ", "%d must be in 1..features (%d)", d.NNZ, d.Features)
		}
	default:
		return Bad("Data.Name", "%q: unknown source (want %s)", d.Name, strings.Join(DataNames, ", "))
	}
	return nil
}

// DefaultImageShape is synthetic-images' shape when none is given:
// CIFAR-10's.
const DefaultImageShape = "3x32x32"

// ImageShape is synthetic-images' shape.
func (d DataConfig) ImageShape() (data.Shape, error) {
	if d.Shape == "" {
		return data.ParseShape(DefaultImageShape)
	}
	return data.ParseShape(d.Shape)
}

// Sparse reports whether the source is read as sparse rows (the
// sparse-logreg model's input).
func (d DataConfig) Sparse() bool { return d.Name == "libsvm" || d.Name == "synthetic-sparse" }

// LoadSparse reads (or generates) sparse training and test sets: LIBSVM
// files, or the synthetic power-law generator.
func (d DataConfig) LoadSparse(seed uint64) (train, test *data.Sparse, err error) {
	switch d.Name {
	case "libsvm":
		if train, err = data.LoadLIBSVM(d.Train, data.LIBSVMOptions{MaxFeatures: d.MaxFeatures, Labels: d.Labels}); err != nil {
			return nil, nil, err
		}
		if d.Test == "" {
			return splitSparse(train, train.Rows-max(1, train.Rows/10))
		}
		test, err = data.LoadLIBSVM(d.Test, data.LIBSVMOptions{Cols: train.Cols, Labels: train.LabelValues})
		return train, test, err
	case "synthetic-sparse":
		nTest := max(1, d.Samples/4)
		all, err := data.SyntheticSparse(data.SyntheticSparseConfig{Rows: d.Samples + nTest, Features: d.Features, NNZ: d.NNZ, Seed: seed})
		if err != nil {
			return nil, nil, err
		}
		return splitSparse(all, d.Samples)
	}
	return nil, nil, fmt.Errorf("Config.Data.Name %s is not a sparse source (want libsvm or synthetic-sparse)", d.Name)
}

func splitSparse(all *data.Sparse, nTrain int) (*data.Sparse, *data.Sparse, error) {
	if nTrain < 1 || nTrain >= all.Rows {
		return nil, nil, fmt.Errorf("the training set has %d rows: too few to hold a test set out (pass Config.Data.Test)", all.Rows)
	}
	train, err := all.Subset(seq(0, nTrain))
	if err != nil {
		return nil, nil, err
	}
	test, err := all.Subset(seq(nTrain, all.Rows))
	return train, test, err
}

// firstRows is a source's row count.
func firstRows(s data.DenseSource) int { n, _, _ := s.Shape(); return n }

// seq is lo, lo+1, …, hi-1.
func seq(lo, hi int) []int {
	idx := make([]int, 0, max(0, hi-lo))
	for i := lo; i < hi; i++ {
		idx = append(idx, i)
	}
	return idx
}

// Open is Load for a rank that will keep only some rows: Fashion-MNIST and
// IDX files come back as data.IDXSource, which reads the labels and headers
// now and a row's pixels only when asked (so a rank holds its shard, not
// the whole set, and a parameter server only the shape); other sources are
// loaded whole, as by Load.
func (d DataConfig) Open(seed uint64) (train, test data.DenseSource, err error) {
	return d.OpenChecked(seed, nil)
}

// OpenWithin is Open with what it loads held to limit bytes (0: no check;
// source says where the limit came from), as Trainer.Run holds it: a LIBSVM
// file is refused before it is parsed or made dense (dml eval).
func (d DataConfig) OpenWithin(seed uint64, limit int64, source string) (train, test data.DenseSource, err error) {
	return d.OpenChecked(seed, func(what string, need float64) error {
		return CheckMemory(limit, source, what, need, "evaluate on a smaller file")
	})
}

// OpenChecked is Open with the memory of what it loads checked (check).
func (d DataConfig) OpenChecked(seed uint64, check MemoryCheck) (train, test data.DenseSource, err error) {
	train, test, err = d.openSources(seed, check)
	if err == nil && d.Cache != "" {
		train, test = cached(train, d.Cache), cached(test, d.Cache)
	}
	return train, test, err
}

// cached is src reading through the cache folder dir, where it is a
// file source that can.
func cached(src data.DenseSource, dir string) data.DenseSource {
	if s, ok := src.(*data.IDXSource); ok {
		return s.WithCache(dir)
	}
	return src
}

// openSources is OpenChecked without the cache.
func (d DataConfig) openSources(seed uint64, check MemoryCheck) (train, test data.DenseSource, err error) {
	switch d.Name {
	case "fashion-mnist":
		tr, te, err := data.OpenFashionMNIST(d.Dir)
		if err != nil {
			return nil, nil, err
		}
		return tr, te, nil
	case "cifar10", "cifar100", "cifar100-coarse":
		tr, te, err := d.openCIFAR()
		if err != nil {
			return nil, nil, Usage(err)
		}
		return tr, te, nil
	case "idx":
		p := strings.Split(d.Train, ",")
		tr, err := data.OpenIDXPair(p[0], p[1], 0)
		if err != nil {
			return nil, nil, err
		}
		if d.Test == "" {
			n, _, _ := tr.Shape()
			if n < 2 {
				return nil, nil, fmt.Errorf("the training set has %d rows: too few to hold a test set out (pass Config.Data.Test)", n)
			}
			a, b := tr.Split(n - max(1, n/10))
			return a, b, nil
		}
		p = strings.Split(d.Test, ",")
		te, err := data.OpenIDXPair(p[0], p[1], 0)
		if err != nil {
			return nil, nil, err
		}
		_, trCols, trClasses := tr.Shape()
		_, teCols, teClasses := te.Shape()
		if teCols != trCols {
			return nil, nil, fmt.Errorf("test images have %d pixels, training images %d", teCols, trCols)
		}
		classes := max(trClasses, teClasses)
		return tr.WithClasses(classes), te.WithClasses(classes), nil
	}
	tr, te, err := d.loadWithin(seed, check)
	if err != nil {
		return nil, nil, err
	}
	return tr, te, nil
}

// Load reads (or generates) the whole training and test sets.
func (d DataConfig) Load(seed uint64) (train, test *data.Dense, err error) {
	return d.loadWithin(seed, nil)
}

// sparseBytes is the memory a sparse set holds.
func sparseBytes(s *data.Sparse) float64 {
	return 8*float64(len(s.Indptr)) + 4*float64(len(s.Indices)+len(s.Values)+len(s.Y))
}

// CheckFiles refuses files whose parse would not fit: 3 times their
// size (a nonzero takes at least 4 bytes of text, "1:1 ", and 8 parsed,
// in arrays that grow by doubling as the file is read: measured on a
// 188 MB file of 400 lines × 40,000 features, the process peaked at 2.6
// times the text). A gzip file's parse is bounded later, by what it holds.
func CheckFiles(check MemoryCheck, paths ...string) error {
	return checkFilesTimes(check, 3, paths...)
}

// checkFilesTimes refuses files whose load would need more than times
// their size.
func checkFilesTimes(check MemoryCheck, times float64, paths ...string) error {
	if check == nil {
		return nil
	}
	total := 0.0
	var names []string
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && p != "" {
			total += float64(st.Size())
			names = append(names, p)
		}
	}
	if total == 0 {
		return nil
	}
	return check(fmt.Sprintf("reading %s (%s)", strings.Join(names, " and "), GB(total)), times*total)
}

func (d DataConfig) loadWithin(seed uint64, check MemoryCheck) (train, test *data.Dense, err error) {
	switch d.Name {
	case "fashion-mnist":
		return data.LoadFashionMNIST(d.Dir)
	case "cifar10", "cifar100", "cifar100-coarse":
		tr, te, err := d.openCIFAR()
		if err != nil {
			return nil, nil, err
		}
		if train, err = tr.Subset(seq(0, firstRows(tr))); err != nil {
			return nil, nil, err
		}
		test, err = te.Subset(seq(0, firstRows(te)))
		return train, test, err
	case "idx":
		p := strings.Split(d.Train, ",")
		if train, err = data.LoadIDXPair(p[0], p[1], 0); err != nil {
			return nil, nil, err
		}
		if d.Test == "" {
			return holdOut(train)
		}
		p = strings.Split(d.Test, ",")
		if test, err = data.LoadIDXPair(p[0], p[1], 0); err != nil {
			return nil, nil, err
		}
		if test.Cols != train.Cols {
			return nil, nil, fmt.Errorf("test images have %d pixels, training images %d", test.Cols, train.Cols)
		}
		classes := max(train.Classes, test.Classes)
		train.Classes, test.Classes = classes, classes
		return train, test, nil
	case "libsvm":
		// Checked before each step that allocates by the files' size: the
		// parse (its arrays take up to about twice the text), and the dense
		// sets with what is held while they are made (the sparse sets, the
		// dense set and its train/test copies).
		if err := CheckFiles(check, d.Train, d.Test); err != nil {
			return nil, nil, err
		}
		tr, err := data.LoadLIBSVM(d.Train, data.LIBSVMOptions{MaxFeatures: d.MaxFeatures, Labels: d.Labels})
		if err != nil {
			return nil, nil, err
		}
		var te *data.Sparse
		if d.Test != "" {
			if te, err = data.LoadLIBSVM(d.Test, data.LIBSVMOptions{Cols: tr.Cols, Labels: tr.LabelValues}); err != nil {
				return nil, nil, err
			}
		}
		if check != nil {
			held, rows := sparseBytes(tr), float64(tr.Rows)
			if te != nil {
				held, rows = held+sparseBytes(te), rows+float64(te.Rows)
			}
			need := held + 2*4*rows*float64(tr.Cols+1)
			if err := check(fmt.Sprintf("LIBSVM data of %.0f samples × %d features, loaded dense", rows, tr.Cols), need); err != nil {
				return nil, nil, err
			}
		}
		if train, err = tr.ToDense(); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Train, err)
		}
		if d.Test == "" {
			return holdOut(train)
		}
		if test, err = te.ToDense(); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Test, err)
		}
		return train, test, nil
	case "text":
		return d.loadText(check)
	case "synthetic":
		nTest := max(1, d.Samples/4)
		all, err := data.Synthetic(data.SyntheticConfig{Rows: d.Samples + nTest, Cols: d.Features,
			Classes: d.Classes, Noise: d.Noise, Seed: seed})
		if err != nil {
			return nil, nil, err
		}
		return split(all, d.Samples)
	case "synthetic-images":
		shape, err := d.ImageShape()
		if err != nil {
			return nil, nil, err
		}
		nTest := max(1, d.Samples/4)
		all, err := data.SyntheticImages(data.SyntheticImagesConfig{Rows: d.Samples + nTest, Shape: shape,
			Classes: d.Classes, Noise: d.Noise, Seed: seed})
		if err != nil {
			return nil, nil, err
		}
		return split(all, d.Samples)
	}
	return nil, nil, fmt.Errorf("unknown data source %q", d.Name)
}

// loadText reads --data text's windows (data.LoadText): the test file's,
// or the last tenth of the training file's.
func (d DataConfig) loadText(check MemoryCheck) (train, test *data.Dense, err error) {
	// A byte becomes a float32 token in about (T+1)/T windows, read whole
	// first: about 5 bytes per byte of text.
	if err := checkFilesTimes(check, 5, d.Train, d.Test); err != nil {
		return nil, nil, err
	}
	if train, err = data.LoadText(d.Train, d.EffectiveSeqLen()); err != nil {
		return nil, nil, Usage(err)
	}
	if d.Test == "" {
		return holdOut(train)
	}
	if test, err = data.LoadText(d.Test, d.EffectiveSeqLen()); err != nil {
		return nil, nil, Usage(err)
	}
	return train, test, nil
}

// holdOut keeps the last tenth of a training set (at least one row) as the test set.
func holdOut(all *data.Dense) (*data.Dense, *data.Dense, error) {
	if all.Rows < 2 { // the user's data and settings: a usage error
		return nil, nil, Usage(fmt.Errorf("the training set has %d %s: too few to hold a test set out (pass Config.Data.Test%s)", all.Rows, plural(all.Rows, "sample", "samples"), shorterWindows(all)))
	}
	train, _ := HoldOutRows(all.Rows)
	return split(all, train)
}

// HoldOutRows splits n samples as holdOut does: the last tenth (at least
// one) is the test set.
func HoldOutRows(n int) (train, test int) {
	test = max(1, n/10)
	return n - test, test
}

func split(all *data.Dense, nTrain int) (*data.Dense, *data.Dense, error) {
	train, err := all.Subset(seq(0, nTrain))
	if err != nil {
		return nil, nil, err
	}
	test, err := all.Subset(seq(nTrain, all.Rows))
	return train, test, err
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// shorterWindows is the hint for a text of too few windows.
func shorterWindows(all *data.Dense) string {
	if all.SampleShape().T > 0 {
		return ", or a shorter Config.Data.SeqLen"
	}
	return ""
}
