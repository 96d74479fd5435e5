package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestCaught(t *testing.T) {
	want := errors.New("plain")
	if err := Caught(func() error { return want }); err != want {
		t.Errorf("error %v, want %v", err, want)
	}
	err := Caught(func() error { var m map[int]int; m[1] = 2; return nil })
	if err == nil || !strings.Contains(err.Error(), "panic on a communication goroutine: assignment to entry in nil map") || !strings.Contains(err.Error(), "caught_test.go") {
		t.Errorf("panic came back as %v", err)
	}
}
