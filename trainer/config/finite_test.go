package config

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/dml-project/dml/trainer/model"
)

// TestFiniteLayerNamed: a model file's non-finite number is named by its
// layer and its key in the file (it was "Net.P NaN", Go's field).
func TestFiniteLayerNamed(t *testing.T) {
	c := Config{Net: []model.LayerSpec{{Kind: model.KindFlatten}, {Kind: model.KindLinear, Name: "fc", Out: 4}, {Kind: model.KindDropout, P: math.NaN()}}}
	err := finiteFloats(reflect.ValueOf(c), "")
	if err == nil || !strings.Contains(err.Error(), "layer 2 (dropout): p NaN must be a finite number") {
		t.Fatalf("got %v", err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Net" {
		t.Errorf("%v: want a ConfigError on Net (the flag --model-file)", err)
	}
}
