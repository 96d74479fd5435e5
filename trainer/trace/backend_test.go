package trace

import (
	"reflect"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// fakeBuf is a host buffer of the fake backend.
type fakeBuf struct{ data []float32 }

func (b *fakeBuf) Len() int        { return len(b.data) }
func (b *fakeBuf) Data() []float32 { return b.data }
func newFakeBuf(n int) *fakeBuf    { return &fakeBuf{data: make([]float32, n)} }
func bufValue(n int) reflect.Value { return reflect.ValueOf(kernels.Buffer(newFakeBuf(n))) }
func bufFresh() map[reflect.Type]func(int) reflect.Value {
	return map[reflect.Type]func(int) reflect.Value{reflect.TypeFor[kernels.Buffer](): bufValue}
}

// fakeBackend records every call and returns fixed results (and
// callLog.err); it computes nothing.
type fakeBackend struct {
	callLog
	alloc, view kernels.Buffer
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{alloc: newFakeBuf(3), view: newFakeBuf(2)}
}

func (f *fakeBackend) Name() string { f.record("Name"); return "fake" }
func (f *fakeBackend) Alloc(n int) (kernels.Buffer, error) {
	return f.alloc, f.record("Alloc", n)
}
func (f *fakeBackend) Free(b kernels.Buffer) error { return f.record("Free", b) }
func (f *fakeBackend) View(b kernels.Buffer, off, n int) kernels.Buffer {
	f.record("View", b, off, n)
	return f.view
}
func (f *fakeBackend) Upload(dst kernels.Buffer, src []float32) error {
	return f.record("Upload", dst, src)
}
func (f *fakeBackend) Download(dst []float32, src kernels.Buffer) error {
	return f.record("Download", dst, src)
}
func (f *fakeBackend) Copy(dst, src kernels.Buffer) error { return f.record("Copy", dst, src) }
func (f *fakeBackend) Fill(b kernels.Buffer, v float32) error {
	return f.record("Fill", b, v)
}
func (f *fakeBackend) Sync() error  { return f.record("Sync") }
func (f *fakeBackend) Close() error { return f.record("Close") }
func (f *fakeBackend) Gemm(transA, transB bool, m, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	return f.record("Gemm", transA, transB, m, n, k, alpha, a, b, beta, c)
}
func (f *fakeBackend) AddBias(x, bias kernels.Buffer, rows, cols int) error {
	return f.record("AddBias", x, bias, rows, cols)
}
func (f *fakeBackend) SumRows(dst, x kernels.Buffer, rows, cols int, beta float32) error {
	return f.record("SumRows", dst, x, rows, cols, beta)
}
func (f *fakeBackend) Relu(y, x kernels.Buffer) error { return f.record("Relu", y, x) }
func (f *fakeBackend) ReluGrad(dx, dy, y kernels.Buffer) error {
	return f.record("ReluGrad", dx, dy, y)
}
func (f *fakeBackend) SoftmaxCrossEntropy(grad, logits, labels kernels.Buffer, rows, cols int, scale float32, stats kernels.Buffer) error {
	return f.record("SoftmaxCrossEntropy", grad, logits, labels, rows, cols, scale, stats)
}
func (f *fakeBackend) SigmoidCrossEntropy(grad, logits, labels kernels.Buffer, rows int, scale float32, stats kernels.Buffer) error {
	return f.record("SigmoidCrossEntropy", grad, logits, labels, rows, scale, stats)
}
func (f *fakeBackend) Predict(out, x kernels.Buffer, rows, cols int) error {
	return f.record("Predict", out, x, rows, cols)
}
func (f *fakeBackend) Axpy(alpha float32, x, y kernels.Buffer) error {
	return f.record("Axpy", alpha, x, y)
}
func (f *fakeBackend) Scale(alpha float32, x kernels.Buffer) error {
	return f.record("Scale", alpha, x)
}
func (f *fakeBackend) Sum(dst kernels.Buffer, srcs ...kernels.Buffer) error {
	return f.record("Sum", dst, srcs)
}
func (f *fakeBackend) Dot(x, y kernels.Buffer) (float64, error) {
	return 2.5, f.record("Dot", x, y)
}
func (f *fakeBackend) NonFinite(x kernels.Buffer) (int, error) {
	return 7, f.record("NonFinite", x)
}
func (f *fakeBackend) Optimize(w, g, st kernels.Buffer, u optim.Update) error {
	return f.record("Optimize", w, g, st, u)
}

var backendCases = map[string]methodCase{
	"Name": {}, "View": {},
	"Alloc": {span: true, cat: Compute}, "Free": {span: true, cat: Compute},
	"Upload": {span: true, cat: IO}, "Download": {span: true, cat: IO},
	"Copy": {span: true, cat: Compute}, "Fill": {span: true, cat: Compute},
	"Sync": {span: true, cat: Wait}, "Close": {span: true, cat: Compute},
	"Gemm": {span: true, cat: Compute}, "AddBias": {span: true, cat: Compute},
	"SumRows": {span: true, cat: Compute}, "Relu": {span: true, cat: Compute},
	"ReluGrad": {span: true, cat: Compute}, "SoftmaxCrossEntropy": {span: true, cat: Compute},
	"SigmoidCrossEntropy": {span: true, cat: Compute}, "Predict": {span: true, cat: Compute},
	"Axpy": {span: true, cat: Compute}, "Scale": {span: true, cat: Compute},
	"Sum": {span: true, cat: Compute}, "Dot": {span: true, cat: Compute},
	"NonFinite": {span: true, cat: Compute},
	"Optimize":  {span: true, cat: Update},
}

func TestBackendForwardsEveryOp(t *testing.T) {
	fake := newFakeBackend()
	rec := NewRecorder(Options{})
	b := Backend(fake, rec)
	if u := b.(Unwrapper[kernels.Backend]).Unwrap(); u != kernels.Backend(fake) {
		t.Fatalf("Unwrap gives %v, not the wrapped Backend", u)
	}
	checkForwarding(t, reflect.TypeFor[kernels.Backend](), b, fake, &fake.callLog, rec,
		&argGen{fresh: bufFresh()}, backendCases, nil)
}

// TestBackendSpanArgs checks the shapes a few ops record.
func TestBackendSpanArgs(t *testing.T) {
	rec := NewRecorder(Options{})
	b := Backend(newFakeBackend(), rec)
	x, y := newFakeBuf(12), newFakeBuf(12)
	b.Gemm(true, false, 2, 3, 4, 1, x, y, 0, x)
	b.Upload(x, make([]float32, 12))
	b.Sum(x, x, y, y)
	b.Free(nil)
	want := []map[string]int64{
		{"m": 2, "n": 3, "k": 4, "trans_a": 1, "trans_b": 0},
		{"bytes": 48},
		{"n": 12, "srcs": 3},
		{"n": -1},
	}
	spans := rec.Snapshot().Spans
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d", len(spans), len(want))
	}
	for i, w := range want {
		got := map[string]int64{}
		for _, a := range spans[i].Args {
			got[a.Key] = a.Value
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s args %v, want %v", spans[i].Name, got, w)
		}
	}
}

func TestBackendOffReturnsTheBackend(t *testing.T) {
	fake := newFakeBackend()
	if b := Backend(fake, Nop); b != kernels.Backend(fake) {
		t.Error("Backend(b, Nop) wrapped b")
	}
	if b := Backend(fake, nil); b != kernels.Backend(fake) {
		t.Error("Backend(b, nil) wrapped b")
	}
}
