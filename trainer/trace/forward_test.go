package trace

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// A call a fake received: the method and its arguments.
type call struct {
	method string
	args   []any
}

// callLog is embedded in the fakes.
type callLog struct {
	calls []call
	err   error // what every method that can fail returns
}

func (l *callLog) record(method string, args ...any) error {
	l.calls = append(l.calls, call{method, args})
	return l.err
}

func (l *callLog) last(t *testing.T) call {
	t.Helper()
	if len(l.calls) == 0 {
		t.Fatal("the fake received no call")
	}
	return l.calls[len(l.calls)-1]
}

// argGen makes distinct arguments of any type the seams take, so that a
// decorator that swaps, drops or copies one is caught.
type argGen struct {
	next  int
	fresh map[reflect.Type]func(n int) reflect.Value // interface types
}

func (g *argGen) value(t reflect.Type) reflect.Value {
	g.next++
	n := g.next
	v := reflect.New(t).Elem()
	switch {
	case g.fresh[t] != nil:
		return g.fresh[t](n)
	case t == reflect.TypeFor[error]():
		v.Set(reflect.ValueOf(fmt.Errorf("argument error %d", n)))
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64: // int, time.Duration
		v.SetInt(int64(n))
	case t.Kind() == reflect.Uint8: // optim.Kind
		v.SetUint(uint64(n % 256))
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64: // float64: optim.LARSStep
		v.SetFloat(float64(n) + 0.5)
	case t.Kind() == reflect.Bool:
		v.SetBool(n%2 == 1)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Interface:
		v = reflect.MakeSlice(t, 0, 2)
		v = reflect.Append(v, g.value(t.Elem()), g.value(t.Elem()))
	case t.Kind() == reflect.Slice:
		v = reflect.MakeSlice(t, n, n)
	case t.Kind() == reflect.Struct: // each field its own value (optim.Update)
		for i := range t.NumField() {
			v.Field(i).Set(g.value(t.Field(i).Type))
		}
	default:
		panic(fmt.Sprintf("argGen: no values of type %v", t))
	}
	return v
}

// same reports whether a and b are the same value: equal scalars, the very
// same interface or pointer values, slices of the same memory.
func same(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if !va.IsValid() || !vb.IsValid() {
		return va.IsValid() == vb.IsValid()
	}
	if va.Type() != vb.Type() {
		return false
	}
	if va.Kind() == reflect.Slice {
		if va.Len() != vb.Len() || va.Pointer() != vb.Pointer() {
			return false
		}
		if va.Type().Elem().Kind() == reflect.Interface {
			for i := range va.Len() {
				if !same(va.Index(i).Interface(), vb.Index(i).Interface()) {
					return false
				}
			}
		}
		return true
	}
	return a == b
}

// methodCase is what a forwarding check expects of one method.
type methodCase struct {
	span   bool     // the decorator records a span for it
	cat    Category // of that span
	errArg int      // 1 + the index of an error argument the span carries (Abort)
}

// checkForwarding calls every method of the interface iface through
// wrapped with distinct arguments, once with the fake succeeding and once
// with it failing, and checks that the fake received exactly that call and
// that the results are the fake's own; then that each call made the span
// cases says, carrying the error when there was one. results(method, out)
// may replace a result the decorator legitimately wraps (a Request) by what
// it wraps before comparing.
func checkForwarding(t *testing.T, iface reflect.Type, wrapped, fake any, log *callLog, rec *Recorder,
	gen *argGen, cases map[string]methodCase, unwrap func(method string, out []reflect.Value)) {
	t.Helper()
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		c, ok := cases[m.Name]
		if !ok {
			t.Errorf("%s: no test case for method %s", iface, m.Name)
			continue
		}
		for _, fail := range []error{nil, errors.New("fake failure in " + m.Name)} {
			log.err = fail
			in := make([]reflect.Value, m.Type.NumIn())
			for j := range in {
				in[j] = gen.value(m.Type.In(j))
			}
			callFn := reflect.Value.Call
			if m.Type.IsVariadic() {
				callFn = reflect.Value.CallSlice
			}
			before := len(rec.Snapshot().Spans)
			ncalls := len(log.calls)
			out := callFn(reflect.ValueOf(wrapped).MethodByName(m.Name), in)

			if len(log.calls) != ncalls+1 {
				t.Errorf("%s: the fake received %d calls, want 1", m.Name, len(log.calls)-ncalls)
				continue
			}
			got := log.last(t)
			if got.method != m.Name || len(got.args) != len(in) {
				t.Errorf("%s: the fake received %s%v", m.Name, got.method, got.args)
				continue
			}
			for j := range in {
				if !same(got.args[j], in[j].Interface()) {
					t.Errorf("%s: argument %d arrived as %v, was %v", m.Name, j, got.args[j], in[j])
				}
			}

			// What the fake itself returns for these arguments.
			want := callFn(reflect.ValueOf(fake).MethodByName(m.Name), in)
			log.calls = log.calls[:ncalls]
			if unwrap != nil {
				unwrap(m.Name, out)
			}
			for j := range out {
				if !same(out[j].Interface(), want[j].Interface()) {
					t.Errorf("%s (fake error %v): result %d is %v, want %v", m.Name, fail, j, out[j], want[j])
				}
			}

			spans := rec.Snapshot().Spans[before:]
			if !c.span {
				if len(spans) != 0 {
					t.Errorf("%s: recorded %d spans, want none", m.Name, len(spans))
				}
				continue
			}
			if len(spans) != 1 {
				t.Errorf("%s: recorded %d spans, want 1", m.Name, len(spans))
				continue
			}
			s := spans[0]
			if s.Name != m.Name || s.Cat != c.cat {
				t.Errorf("%s: span %q category %v, want %q %v", m.Name, s.Name, s.Cat, m.Name, c.cat)
			}
			wantErr := ""
			if fail != nil {
				wantErr = fail.Error()
			}
			if c.errArg > 0 {
				wantErr = in[c.errArg-1].Interface().(error).Error()
			}
			if s.Err != wantErr {
				t.Errorf("%s (fake error %v): span error %q, want %q", m.Name, fail, s.Err, wantErr)
			}
		}
	}
}
