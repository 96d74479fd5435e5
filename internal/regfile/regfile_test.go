package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefusesWhatIsNotAFile: a FIFO (whose open for reading would
// block until a writer came), devices, a folder and symlinks to them are
// refused by name, without blocking; a regular file and a symlink to one
// open.
func TestOpenRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := func(name, to string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for path, want := range map[string]string{
		fifo:                         "is a FIFO",
		link("to-fifo", fifo):        "is a FIFO",
		"/dev/null":                  "is a character device",
		link("to-zero", "/dev/zero"): "is a character device",
		dir:                          "is a folder",
		reg:                          "",
		link("to-reg", reg):          "",
	} {
		done := make(chan error, 2)
		go func() {
			f, err := Open(path)
			if err == nil {
				f.Close()
			}
			done <- err
			_, err = ReadFile(path, 0)
			done <- err
		}()
		for _, call := range []string{"Open", "ReadFile"} {
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a hang guard, not a timing
				t.Fatalf("%s(%s) blocked", call, path)
			}
			switch {
			case want == "" && err != nil:
				t.Errorf("%s(%s): %v", call, path, err)
			case want != "" && (!errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), path+" "+want)):
				t.Errorf("%s(%s): %v, want an error saying it %s", call, path, err, want)
			}
		}
		if err := Check(path); (want == "") != (err == nil) {
			t.Errorf("Check(%s): %v", path, err)
		}
	}
}

// TestReadFileBound: a file larger than what its kind can hold is refused
// by its size.
func TestReadFileBound(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, 100); err != nil || len(b) != 100 {
		t.Errorf("at the limit: %d bytes, %v", len(b), err)
	}
	if _, err := ReadFile(p, 99); err == nil || !strings.Contains(err.Error(), "is 100 bytes, more than the 99") {
		t.Errorf("over the limit: %v", err)
	}
}

// TestCreate: Create makes or truncates a regular file, and refuses a FIFO
// (without blocking for a reader) and a device, leaving them as they were.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{reg, filepath.Join(dir, "new")} {
		if err := WriteFile(p, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != "x" {
			t.Errorf("%s holds %q, want \"x\"", p, b)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	null := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{fifo: "is a FIFO", null: "is a character device"} {
		done := make(chan error, 1)
		go func() { _, err := Create(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
				t.Errorf("Create(%s): %v, want it refused: %s", p, err, want)
			}
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("Create(%s) blocked", p)
		}
	}
}
