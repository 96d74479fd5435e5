package config

import (
	"fmt"

	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

// The network a Config builds.

// BuildArch derives a dense model's architecture from the config and the
// data: its samples' shape (data.SampleShape) and its classes.
func BuildArch(cfg Config, shape data.Shape, classes int) (model.Arch, error) {
	features := shape.Size()
	if shape.T > 0 && !cfg.Model.IsNetwork() {
		return model.Arch{}, Bad("Model", "%v on a token sequence (--data text): it trains --model gpt, or a model file of sequence layers", cfg.Model)
	}
	switch cfg.Model {
	case MLP:
		return model.NewArch(features, cfg.Hidden, classes, model.SoftmaxCE)
	case Softmax:
		return model.NewArch(features, nil, classes, model.SoftmaxCE)
	case Logreg:
		if classes != 2 {
			return model.Arch{}, Bad("Model", "logreg is binary, but the data has %d classes (use model softmax)", classes)
		}
		return model.NewArch(features, nil, 1, model.SigmoidCE)
	}
	if !cfg.Model.IsNetwork() {
		return model.Arch{}, fmt.Errorf("%v is not a dense model", cfg.Model)
	}
	loss := model.SoftmaxCE
	if shape.T > 0 { // a token sequence: --data text
		loss = model.TokenCE
	}
	a, err := model.NewNet(shape, NetLayers(cfg, classes, shape), classes, loss)
	switch {
	case err == nil:
		return a, nil
	case cfg.Model == NetFile:
		return a, Bad("Net", "on samples of %v: %v", shape, err)
	}
	return a, Bad("Model", "%v on samples of %v: %v (it takes %s)", cfg.Model, shape, err, netPresets[cfg.Model].takes)
}

// NetLayers is a network model's layers for samples of shape and classes
// classes: a preset's or the model file's; nil for the MLP family.
func NetLayers(cfg Config, classes int, shape data.Shape) []model.LayerSpec {
	if p, ok := netPresets[cfg.Model]; ok {
		return p.layers(cfg.GPT, classes, shape)
	}
	if cfg.Model == NetFile {
		return cfg.Net
	}
	return nil
}
