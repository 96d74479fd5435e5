package sweep

import (
	"bytes"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Words is a command line in a sweep file: a list, or one string split at
// spaces ("mpirun --oversubscribe").
type Words []string

// UnmarshalYAML reads a list or a string.
func (w *Words) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*w = strings.Fields(n.Value)
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*w = l
	return nil
}

// specFile is Spec as a YAML file spells it.
type specFile struct {
	Spec      `yaml:",inline"`
	Launcher  *Words `yaml:"launcher"`
	TrainArgs *Words `yaml:"train_args"`
}

// LoadSpec reads a YAML sweep file over base: keys it has replace base's
// fields (the keys are Spec's yaml names; an unknown key is an error).
func LoadSpec(path string, base Spec) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return base, specErr("--config: %v", err)
	}
	return ParseSpec(b, base)
}

// ParseSpec is LoadSpec on a file's contents.
func ParseSpec(b []byte, base Spec) (Spec, error) {
	f := specFile{Spec: base}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && err.Error() != "EOF" {
		return base, specErr("sweep file: %v", err)
	}
	if f.Launcher != nil {
		f.Spec.Launcher = *f.Launcher
	}
	if f.TrainArgs != nil {
		f.Spec.TrainArgs = *f.TrainArgs
	}
	return f.Spec, nil
}
