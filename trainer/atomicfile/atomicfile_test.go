package atomicfile

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// leftovers lists the temporary files Write may leave in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWriteCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.npz")
	if err := Write(path, 0o640, writeString("first")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("new file has mode %v, want 0640", st.Mode().Perm())
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, 0o644, writeString("second")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	st, _ = os.Stat(path)
	if string(b) != "second" || st.Mode().Perm() != 0o600 {
		t.Errorf("after replace: %q mode %v, want \"second\" and the old file's 0600", b, st.Mode().Perm())
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

// TestWriteFailureKeepsOldFile: the bug was an in-place truncation, so a
// failed save destroyed the previous weights.
func TestWriteFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.npz")
	if err := os.WriteFile(path, []byte("good old weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full (simulated)")
	err := Write(path, 0o644, func(w io.Writer) error {
		io.WriteString(w, strings.Repeat("x", 3<<20)) // past the buffer: on disk already
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want the write's error naming %s", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "good old weights" {
		t.Errorf("old file now holds %d bytes", len(b))
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

func TestWriteRefusesFolder(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, 0o644, writeString("x")); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("Write over a folder: %v", err)
	}
	if err := CheckWritable(dir); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("CheckWritable of a folder: %v", err)
	}
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("keep"), 0o644)
	if err := CheckWritable(filepath.Join(dir, "new.npz")); err != nil {
		t.Errorf("writable folder: %v", err)
	}
	if err := CheckWritable(file); err != nil {
		t.Errorf("existing file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("CheckWritable changed the target: %q", b)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing", "w.npz"): "does not exist",
		filepath.Join(file, "w.npz"):           "is not a folder",
	} {
		if err := CheckWritable(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckWritable(%s) = %v, want %q", path, err, want)
		}
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: the read-only folder case is not checked (root writes anyway)")
		return
	}
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	if err := CheckWritable(filepath.Join(ro, "w.npz")); err == nil || !strings.Contains(err.Error(), "cannot create") {
		t.Errorf("read-only folder: %v", err)
	}
	if err := Write(filepath.Join(ro, "w.npz"), 0o644, writeString("x")); err == nil {
		t.Errorf("Write into a read-only folder succeeded")
	}
}

// TestKillDuringWrite kills a process in the middle of Write (SIGKILL, no
// chance to clean up): the old file must be intact and whole.
func TestKillDuringWrite(t *testing.T) {
	if path := os.Getenv("ATOMICFILE_TEST_WRITE"); path != "" {
		Write(path, 0o644, func(w io.Writer) error {
			io.WriteString(w, strings.Repeat("new", 1<<20)) // beyond the buffer
			os.WriteFile(path+".started", nil, 0o644)
			time.Sleep(time.Minute)
			return nil
		})
		os.Exit(0)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "w.npz")
	os.WriteFile(path, []byte("good old weights"), 0o644)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringWrite$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_TEST_WRITE="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path + ".started"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the writer never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if b, _ := os.ReadFile(path); string(b) != "good old weights" {
		t.Errorf("after a kill mid-write the file holds %d bytes, want the old 16", len(b))
	}
	if l := leftovers(t, dir); len(l) != 1 {
		t.Errorf("want the killed writer's one temporary file beside the target, found %v", l)
	}
}

// TestFullDisk writes onto a 64 KiB tmpfs (needs root and mount(2), as in
// CI containers; skipped elsewhere): a save that runs out of space fails
// and leaves the previous file whole; on a disk already full,
// CheckWritable says so before any work.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() != 0 || exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).Run() != nil {
		t.Skip("cannot mount a small tmpfs here (needs root): the full-disk case is not checked")
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	path := filepath.Join(dir, "w.npz")
	old := strings.Repeat("o", 40<<10)
	if err := Write(path, 0o644, writeString(old)); err != nil {
		t.Fatal(err)
	}
	err := Write(path, 0o644, writeString(strings.Repeat("n", 48<<10)))
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("a save larger than the free space: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != old {
		t.Errorf("the old file now holds %d bytes", len(b))
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
	// Fill the rest of the disk, then ask.
	f, _ := os.Create(filepath.Join(dir, "filler"))
	f.Write(make([]byte, 64<<10))
	f.Close()
	if err := CheckWritable(filepath.Join(dir, "other.npz")); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("CheckWritable on a full disk: %v", err)
	}
}

// TestRefusesNonRegularTargets: a target that is a device (a null device
// made in the test's folder, and a symlink to /dev/null), a FIFO or a
// folder is refused by Write and CheckWritable, naming it, and is still
// what it was afterwards (run as root, Write turned /dev/null into a
// regular file holding the weights).
func TestRefusesNonRegularTargets(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	devLink := filepath.Join(dir, "null-link")
	if err := os.Symlink("/dev/null", devLink); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{fifo: "is a FIFO", devLink: "is a character device", sub: "is a folder"}
	dev := filepath.Join(dir, "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(1<<8|3)); err == nil {
		targets[dev] = "is a character device"
	} else {
		t.Logf("mknod: %v (not root): the device made here is not tried; the symlink to /dev/null is", err)
	}
	for path, want := range targets {
		before, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		werr := Write(path, 0o644, func(w io.Writer) error { _, err := w.Write([]byte("weights")); return err })
		cerr := CheckWritable(path)
		for name, err := range map[string]error{"Write": werr, "CheckWritable": cerr} {
			if err == nil || !strings.Contains(err.Error(), path+" "+want) {
				t.Errorf("%s(%s): %v, want an error saying it %s", name, path, err, want)
			}
		}
		after, err := os.Lstat(path)
		if err != nil || after.Mode() != before.Mode() {
			t.Errorf("%s was %v, is now %v (%v)", path, before.Mode(), after.Mode(), err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != len(targets) {
		t.Errorf("the folder holds %d entries, want the %d targets only (no temporary file left)", len(ents), len(targets))
	}
}

// TestRemoveLeftovers: the temporary files of killed writers are removed
// for the targets the caller claims, and nothing else.
func TestRemoveLeftovers(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{".ckpt-s000000010.npz.tmp-123", ".ckpt-s000000020.npz.tmp-9", ".other.npz.tmp-1", "ckpt-s000000010.npz", ".ckpt-s1.npz"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveLeftovers(dir, func(target string) bool { return strings.HasPrefix(target, "ckpt-s") })
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v; want the two checkpoint leftovers", removed, err)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != ".ckpt-s1.npz .other.npz.tmp-1 ckpt-s000000010.npz" {
		t.Errorf("left %v", left)
	}
}
