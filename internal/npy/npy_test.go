package npy

import (
	"archive/zip"
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/sbinet/npyio/npz"
)

// TestWriterMatchesNpyio: the archive the writer makes of float32
// matrices, vectors and a float64 vector is byte for byte what
// github.com/sbinet/npyio wrote for --save before (so that saved weights
// stay byte-identical across the change), for shapes whose headers pad
// differently.
func TestWriterMatchesNpyio(t *testing.T) {
	for _, rc := range [][2]int{{5, 4}, {3, 5}, {120, 400}, {1, 1}, {10, 784}, {1000, 1}} {
		rows, cols := rc[0], rc[1]
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(i)*0.37 - 5
		}
		labels := []float64{-1, 1, 7}
		var theirs, ours bytes.Buffer
		w := npz.NewWriter(&theirs)
		mat := reflect.NewAt(reflect.ArrayOf(rows, reflect.ArrayOf(cols, reflect.TypeFor[float32]())), unsafe.Pointer(&v[0])).Interface()
		if err := w.Write("class_labels", labels); err != nil {
			t.Fatal(err)
		}
		if err := w.Write("layer0.weight", mat); err != nil {
			t.Fatal(err)
		}
		if err := w.Write("layer0.bias", v[:rows]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		o := NewWriter(&ours, zip.Deflate)
		for _, e := range []struct {
			name string
			data []byte
		}{{"class_labels", Float64(labels, 3)}, {"layer0.weight", Float32(v, rows, cols)}, {"layer0.bias", Float32(v[:rows], rows)}} {
			if err := o.Add(e.name, e.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours.Bytes(), theirs.Bytes()) {
			t.Errorf("%d×%d: the archives differ (%d bytes, npyio's %d)", rows, cols, ours.Len(), theirs.Len())
		}
	}
}

// TestDecodeRoundTrip: what Float32 writes, Decode reads back with its
// shape; Fortran-order and big-endian float64 arrays come out row-major
// float32; and the strict checks refuse truncated, padded and malformed
// arrays.
func TestDecodeRoundTrip(t *testing.T) {
	v := []float32{1, 2, 3, 4, 5, 6}
	got, shape, err := Decode(Float32(v, 2, 3))
	if err != nil || !reflect.DeepEqual(got, v) || !reflect.DeepEqual(shape, []int{2, 3}) {
		t.Fatalf("round trip: %v %v %v", got, shape, err)
	}
	// [[1,2,3],[4,5,6]] in Fortran order, big-endian float64.
	fortran := []byte("\x93NUMPY\x01\x00")
	dict := "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }"
	fortran = append(fortran, byte(len(dict)+1), 0)
	fortran = append(fortran, dict+"\n"...)
	for _, x := range []float64{1, 4, 2, 5, 3, 6} {
		b := make([]byte, 8)
		bits := *(*uint64)(unsafe.Pointer(&x))
		for i := range 8 {
			b[i] = byte(bits >> (56 - 8*i))
		}
		fortran = append(fortran, b...)
	}
	if got, _, err := Decode(fortran); err != nil || !reflect.DeepEqual(got, v) {
		t.Errorf("Fortran-order big-endian float64: %v, %v; want %v", got, err, v)
	}
	good := Float32(v, 6)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", good[:len(good)-1], "truncated or a false header"},
		{"padded", append(append([]byte(nil), good...), 0, 0, 0, 0), "trailing data"},
		{"int", AppendHeader(nil, "<i4", []int{1}), "not supported"},
		{"no magic", []byte("PK\x03\x04 not npy"), "bad magic"},
		{"one-element tuple", append(AppendHeader(nil, "<f4", nil)[:12], "{'descr': '<f4', 'fortran_order': False, 'shape': (1), }\n"...), ""},
	} {
		_, _, err := Decode(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
