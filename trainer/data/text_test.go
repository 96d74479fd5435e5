package data

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTextWindows(t *testing.T) {
	d, err := TextWindows("t", []byte("abcdefghij"), 3)
	if err != nil {
		t.Fatal(err)
	}
	// 10 bytes, windows of 4 stepping by 3: abcd, defg, ghij.
	if d.Rows != 3 || d.Cols != 4 || d.Classes != 256 {
		t.Fatalf("rows %d cols %d classes %d, want 3, 4, 256", d.Rows, d.Cols, d.Classes)
	}
	var got []string
	for r := range d.Rows {
		var s []byte
		for _, v := range d.Row(r) {
			s = append(s, byte(v))
		}
		got = append(got, string(s))
	}
	if strings.Join(got, ",") != "abcd,defg,ghij" {
		t.Errorf("windows %q", got)
	}
	sh := d.SampleShape()
	if sh != (Shape{C: 1, H: 1, W: 1, T: 3}) || sh.Size() != 3 || sh.RowValues() != 4 || sh.String() != "3×1" {
		t.Errorf("shape %+v (size %d, row values %d, %q)", sh, sh.Size(), sh.RowValues(), sh)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	// Bytes above 127 are tokens too.
	d, err = TextWindows("t", []byte{0, 255, 200}, 2)
	if err != nil || d.Rows != 1 || d.X[1] != 255 || d.X[2] != 200 {
		t.Errorf("high bytes: %v %v", d, err)
	}
}

func TestLoadTextRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		path string
		want string
	}{
		{write("empty", ""), "empty"},
		{write("short", "abc"), "shorter than one window of 5"},
		{dir, "folder"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		_, err := LoadText(c.path, 4)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.path, err, c.want)
		}
	}
	if _, err := LoadText(write("ok", "abcde"), 4); err != nil {
		t.Error(err)
	}
	if _, err := LoadText(write("ok2", "abcde"), 0); !errors.Is(err, ErrConfig) {
		t.Errorf("seq len 0: %v", err)
	}
}
