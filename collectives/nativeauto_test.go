package collectives

import "testing"

type advisedComm struct {
	PointToPoint
	native bool
}

func (advisedComm) NativeAllreduceSum([]float32) error { return nil }
func (a advisedComm) NativeForAuto() bool              { return a.native }

// TestNativeForAuto: a transport that says its native AllReduce does not
// fit Auto's thresholds (MPI across nodes) is treated as having none, also
// through a wrapper; one that says nothing keeps it.
func TestNativeForAuto(t *testing.T) {
	if nativeForAuto(advisedComm{native: false}) || !nativeForAuto(advisedComm{native: true}) {
		t.Error("the advisor is not asked")
	}
	if !nativeForAuto(struct{ PointToPoint }{}) {
		t.Error("a transport that says nothing must keep its native AllReduce")
	}
	var inner Comm = struct {
		Comm
		AutoNativeAdvisor
	}{nil, advisedComm{native: false}}
	if nativeForAuto(wrappedUnwrap{inner}) {
		t.Error("the advisor is not found through Unwrap")
	}
}

type wrappedUnwrap struct{ c Comm }

func (w wrappedUnwrap) Unwrap() Comm { return w.c }
