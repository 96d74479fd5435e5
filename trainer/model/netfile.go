package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// A model file describes a network in YAML, one layer per list item, with
// LayerSpec's fields:
//
//	layers:
//	  - {kind: conv, name: conv1, out: 6, kernel: 5, pad: 2}
//	  - {kind: relu}
//	  - {kind: maxpool, kernel: 2}
//	  - {kind: flatten}
//	  - {kind: linear, name: fc1, out: 10}
//
// Unknown keys are errors (a typo names its line); the shapes are checked
// when the network meets the data (NewNet).

// oneLine words a YAML error in one line: each of a TypeError's errors
// (joined by "; "), an unknown key as such.
func oneLine(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if pre, key, ok := strings.Cut(m, ": field "); ok {
			if k, _, ok := strings.Cut(key, " not found in type model.LayerSpec"); ok {
				m = fmt.Sprintf("%s: unknown key %q (want %s)", pre, k, strings.Join(specKeys(), ", "))
			} else if k, _, ok := strings.Cut(key, " not found in type model.netFile"); ok {
				m = fmt.Sprintf("%s: unknown key %q (want layers)", pre, k)
			}
		}
		msgs[i] = goTypes.Replace(m)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// goTypes words the decoder's Go types as a model file's parts.
var goTypes = strings.NewReplacer(
	"into []model.LayerSpec", "into a list of layers (want layers: then - {kind: …} per layer)",
	"into model.LayerSpec", "into a layer (want {kind: …, name: …, …})",
	"into model.netFile", "into a model file (want layers: then a list of layers)")

// specKeys are the keys a layer may have, as the file writes them.
func specKeys() []string {
	var keys []string
	t := reflect.TypeFor[LayerSpec]()
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// intKeys are LayerSpec's whole-number keys.
var intKeys = map[string]bool{"out": true, "kernel": true, "stride": true, "pad": true, "size": true}

// wholeNumbers refuses a layer whose out, kernel, stride or pad is not
// written as a whole number: YAML decodes 7.9 into an int field as 7
// without a word (issue 29).
func wholeNumbers(b []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil || len(doc.Content) == 0 {
		return nil // the decode above said what is wrong
	}
	top := doc.Content[0]
	for k := 0; k+1 < len(top.Content); k += 2 {
		if top.Content[k].Value != "layers" || top.Content[k+1].Kind != yaml.SequenceNode {
			continue
		}
		for i, layer := range top.Content[k+1].Content {
			for j := 0; j+1 < len(layer.Content); j += 2 {
				key, val := layer.Content[j], layer.Content[j+1]
				if intKeys[key.Value] && (val.Kind != yaml.ScalarNode || val.ShortTag() != "!!int") {
					return fmt.Errorf("layer %d (line %d): %s: %q is not a whole number", i, val.Line, key.Value, val.Value)
				}
			}
		}
	}
	return nil
}

// netFile is a model file's document.
type netFile struct {
	Layers []LayerSpec `yaml:"layers"`
}

// MaxNetFileBytes bounds a model file.
const MaxNetFileBytes = 1 << 20

// ParseNetFile reads a model file's layers.
func ParseNetFile(r io.Reader) ([]LayerSpec, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxNetFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxNetFileBytes {
		return nil, fmt.Errorf("more than %d bytes: not a model file", MaxNetFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f netFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty: want a list of layers under layers:")
		}
		return nil, oneLine(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one YAML document (---): a model file is one network")
	}
	if len(f.Layers) == 0 {
		return nil, fmt.Errorf("no layers (want a list under layers:)")
	}
	if err := wholeNumbers(b); err != nil {
		return nil, err
	}
	for i, l := range f.Layers {
		if l.Kind == "" {
			return nil, fmt.Errorf("layer %d: no kind (want one of %s)", i, strings.Join(LayerKinds(), ", "))
		}
	}
	return f.Layers, nil
}
