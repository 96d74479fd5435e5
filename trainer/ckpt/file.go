// Package ckpt is dml's checkpoint file and folder: the file's format (a
// numpy .npz with a checksum, Encode and Decode), where training stands
// (Position, with the re-dealt stretches of an epoch, Segment), the mark of
// an emergency checkpoint (Emergency), the files' names and order (Name,
// List), the atomic write, and the folder's lock (LockDir). What a
// checkpoint holds, and whether it resumes a job, is package trainer's.
package ckpt

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dml-project/dml/internal/npy"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/model"
)

// The checkpoint file: a numpy .npz (a zip of .npy arrays, stored
// uncompressed) that numpy.load reads as it is:
//
//	layerK.weight.npy   float32 [out, in]   the weights, in --save's layout
//	layerK.bias.npy     float32 [out]
//	optimizer.npy       float32 [S·P]       the optimizer's state, S = optim.Kind.StatePer() floats a weight (absent for sgd)
//	residue.workerK.npy float32 [P]         worker K's significantly-modified filter residue (ps, --filters sigmod)
//	meta.json           what the state is of and where training stands (checkpointMeta)
//	checksum.sha256     hex SHA-256 of every entry before it: name, 0, length (u64 LE), bytes
//
// Each zip entry also carries its CRC-32, checked on reading; the checksum
// entry, written last, catches a file cut short, a flipped bit, and
// entries dropped or reordered. numpy's np.load(f)["layer0.weight"] reads
// the weights; meta.json comes back as bytes.

// Format and Version identify the layout above; ReshardVersion is the
// version of a checkpoint whose position is inside
// an epoch re-dealt to another number of ranks (Position.Reshard), which a
// binary from before it would read as a position in the standard order:
// it refuses version 2.
const (
	Format         = "dml-checkpoint"
	Version        = 1
	ReshardVersion = 2
	checksumEntry  = "checksum.sha256"
	metaEntry      = "meta.json"
	optEntry       = "optimizer.npy"
	stateEntry     = "model_state.npy"
)

// Meta is meta.json.
type Meta struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// ConfigHash fingerprints every setting that shapes the weights
	// (trainer's checkpointHash): a checkpoint resumes only a job with the same.
	ConfigHash string     `json:"config_hash"`
	Model      string     `json:"model"`
	Arch       model.Arch `json:"arch"`
	Optimizer  string     `json:"optimizer"`
	Sync       string     `json:"sync"`
	// Ranks is the job's size, Servers its parameter servers (ps) and
	// Workers the ranks that train.
	Ranks       int    `json:"ranks"`
	Servers     int    `json:"servers,omitempty"`
	Workers     int    `json:"workers"`
	Consistency string `json:"consistency,omitempty"`
	Position    `json:"position"`
	// Pushes is the workers' clock (their pushes) where it is not
	// Position.Steps: under ps --push-every > 1 (trainer/paramserver/downpour.go); 0 otherwise.
	Pushes int `json:"pushes,omitempty"`
	// Residues is the number of residue.workerK entries.
	Residues int `json:"residues,omitempty"`
	// RankStates is the number of rankR.state entries (dpsgd: every rank's
	// own model, then its optimizer state).
	RankStates int `json:"rank_states,omitempty"`
	// ClassLabels is the label each class of the model stands for, when
	// that is not the class's own number (LIBSVM data labelled -1/+1…).
	ClassLabels []int64 `json:"class_labels,omitempty"`
	// Emergency marks a checkpoint a survivor wrote when a rank died
	// (Trainer.LastWord); nil for a regular one.
	Emergency *Emergency `json:"emergency,omitempty"`
}

// File is a checkpoint file's contents.
type File struct {
	Meta Meta
	// State: the weights, the optimizer's state (nil for sgd) and the
	// layers' buffers (model.Arch.StateTensors; nil without).
	model.State
	Residues [][]float32 // per worker, or nil
	// RankStates holds, under dpsgd, each rank's model followed by its
	// optimizer state (Params is then the ranks' average, the consensus
	// model, for numpy).
	RankStates [][]float32
}

// Encode writes c as the .npz bytes described above (and sets
// c.Meta.Residues and RankStates from c).
func (c *File) Encode() ([]byte, error) {
	var buf bytes.Buffer
	zw := npy.NewWriter(&buf, zip.Store)
	sum := sha256.New()
	add := func(name string, data []byte) error {
		if name != checksumEntry {
			sumEntry(sum, name, data)
		}
		return zw.Add(name, data)
	}
	for _, t := range c.Meta.Arch.Tensors() {
		if err := add(t.Name+".npy", npy.Float32(c.Params[t.Off:t.Off+t.Len()], t.Shape...)); err != nil {
			return nil, err
		}
	}
	if c.Opt != nil {
		if err := add(optEntry, npy.Float32(c.Opt, len(c.Opt))); err != nil {
			return nil, err
		}
	}
	if c.Buffers != nil {
		if err := add(stateEntry, npy.Float32(c.Buffers, len(c.Buffers))); err != nil {
			return nil, err
		}
	}
	c.Meta.Residues = len(c.Residues)
	for w, r := range c.Residues {
		if err := add(fmt.Sprintf("residue.worker%d.npy", w), npy.Float32(r, len(r))); err != nil {
			return nil, err
		}
	}
	c.Meta.RankStates = len(c.RankStates)
	for r, st := range c.RankStates {
		if err := add(fmt.Sprintf("rank%d.state.npy", r), npy.Float32(st, len(st))); err != nil {
			return nil, err
		}
	}
	meta, err := json.MarshalIndent(c.Meta, "", " ")
	if err != nil {
		return nil, err
	}
	if err := add(metaEntry, append(meta, '\n')); err != nil {
		return nil, err
	}
	if err := add(checksumEntry, []byte(hex.EncodeToString(sum.Sum(nil))+"\n")); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sumEntry(h io.Writer, name string, data []byte) {
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(data))))
	h.Write(data)
}

// Decode parses checkpoint bytes, checking every entry's CRC, the
// checksum and the shapes against the architecture in meta.json. Its
// errors say what is wrong with the file.
func Decode(b []byte) (*File, error) {
	entries, err := Entries(b)
	if err != nil {
		return nil, err
	}
	c := &File{}
	if err := c.decodeMeta(entries[metaEntry], len(b)); err != nil {
		return nil, err
	}
	if err := c.decodeArrays(entries, len(b)); err != nil {
		return nil, err
	}
	return c, nil
}

// Entries reads the zip file b's entries by name, checking each entry's CRC
// and the checksum over them all.
func Entries(b []byte) (map[string][]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("truncated or not a checkpoint (%d bytes): %w", len(b), err)
	}
	entries := map[string][]byte{}
	sum := sha256.New()
	var want string
	for _, f := range zr.File {
		if f.UncompressedSize64 > uint64(len(b)) {
			return nil, fmt.Errorf("entry %s claims %d bytes in a file of %d", f.Name, f.UncompressedSize64, len(b))
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("entry %s: %w", f.Name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, int64(len(b))))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("corrupted: entry %s: %w", f.Name, err)
		}
		if _, dup := entries[f.Name]; dup {
			return nil, fmt.Errorf("entry %s appears twice", f.Name)
		}
		entries[f.Name] = data
		if f.Name == checksumEntry {
			want = strings.TrimSpace(string(data))
			continue
		}
		sumEntry(sum, f.Name, data)
	}
	if want == "" {
		return nil, errors.New("no checksum entry: not a dml checkpoint, or cut short")
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return nil, fmt.Errorf("corrupted: checksum %s, the file says %s", got[:16], want[:min(16, len(want))])
	}
	return entries, nil
}

// decodeMeta reads meta.json into c.Meta and checks its format, version
// and architecture (which a file of size bytes could hold).
func (c *File) decodeMeta(meta []byte, size int) error {
	if err := json.Unmarshal(meta, &c.Meta); err != nil {
		return fmt.Errorf("%s: %w", metaEntry, err)
	}
	if c.Meta.Format != Format || c.Meta.Version != Version && c.Meta.Version != ReshardVersion {
		return fmt.Errorf("format %q version %d, want %q version %d or %d", c.Meta.Format, c.Meta.Version, Format, Version, ReshardVersion)
	}
	if (c.Meta.Version == ReshardVersion) != (len(c.Meta.Reshard) > 0) {
		return fmt.Errorf("version %d with %d re-dealt stretches", c.Meta.Version, len(c.Meta.Reshard))
	}
	arch := c.Meta.Arch
	if len(arch.Sizes) < 2 || slices.ContainsFunc(arch.Sizes, func(s int) bool { return s <= 0 || s > size }) {
		return fmt.Errorf("bad architecture %v", arch.Sizes)
	}
	if err := arch.Check(); err != nil {
		return fmt.Errorf("bad architecture: %w", err)
	}
	if arch.NumParams() > size/4 {
		return fmt.Errorf("architecture %s has %d parameters, more than a file of %d bytes holds", arch.Describe(), arch.NumParams(), size)
	}
	return nil
}

// decodeArrays reads the weights, statistics, optimizer state, residues
// and rank states from entries, each in the shape c.Meta says.
func (c *File) decodeArrays(entries map[string][]byte, size int) error {
	arch := c.Meta.Arch
	var err error
	c.Params = make([]float32, 0, min(arch.NumParams(), size/4))
	array := func(name string, shape ...int) ([]float32, error) {
		data, ok := entries[name]
		if !ok {
			return nil, fmt.Errorf("no %s", name)
		}
		v, sh, err := npy.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if !slices.Equal(sh, shape) {
			return nil, fmt.Errorf("%s has shape %v, the model needs %v", name, sh, shape)
		}
		return v, nil
	}
	for _, t := range arch.Tensors() {
		v, err := array(t.Name+".npy", t.Shape...)
		if err != nil {
			return err
		}
		c.Params = append(c.Params, v...)
	}
	p := arch.NumParams()
	if ns := arch.NumState(); ns > 0 {
		if c.Buffers, err = array(stateEntry, ns); err != nil {
			return err
		}
	}
	if _, ok := entries[optEntry]; ok {
		per := 1 // the optimizer's state floats per weight (Adam: 2)
		if k, err := optim.ParseKind(c.Meta.Optimizer); err == nil && k.StatePer() > 0 {
			per = k.StatePer()
		}
		if c.Opt, err = array(optEntry, per*p); err != nil {
			return err
		}
	}
	for w := range c.Meta.Residues {
		r, err := array(fmt.Sprintf("residue.worker%d.npy", w), p)
		if err != nil {
			return err
		}
		c.Residues = append(c.Residues, r)
	}
	for r := range c.Meta.RankStates {
		name := fmt.Sprintf("rank%d.state.npy", r)
		data, ok := entries[name]
		if !ok {
			return fmt.Errorf("no %s", name)
		}
		st, sh, err := npy.Decode(data)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if len(sh) != 1 || sh[0] < p {
			return fmt.Errorf("%s has shape %v, want at least the model's %d values", name, sh, p)
		}
		c.RankStates = append(c.RankStates, st)
	}
	return nil
}
