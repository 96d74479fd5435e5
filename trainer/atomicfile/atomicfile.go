// Package atomicfile writes files so that a reader, a kill or a full disk
// never sees a half-written one: the content goes to a temporary file in the
// target's folder, which is synced, closed and renamed over the target, and
// the folder is synced so that the rename itself survives a crash. Until the
// rename the previous file at the path (if any) is untouched; after it, the
// new one is complete.
//
// Write is what dml's --save uses, and what checkpoints use. CheckWritable
// lets a program refuse an unwritable target before hours of work instead of
// after.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dml-project/dml/internal/regfile"
)

// tempPrefix starts the name of every temporary file: ".NAME.tmp-RANDOM" in
// the target's folder (hidden, and named after the file it will become, so a
// leftover from a killed writer is easy to recognise and remove).
func tempPattern(path string) string { return "." + filepath.Base(path) + ".tmp-*" }

// Write creates or replaces the file at path with what write produces.
// write gets a buffered writer onto a temporary file in path's folder; when
// it returns nil, the buffer is flushed, the file is synced to disk, closed,
// given mode perm (or, when path already exists, the existing file's
// permission bits) and renamed over path, and the folder is synced. When
// write or any of these steps fails, the temporary file is removed, path is
// left as it was, and the error says which step failed.
//
// A process killed during Write leaves path as it was, plus possibly a
// temporary file named .NAME.tmp-* beside it.
//
// A path that exists and is not a regular file (after symlinks: a device
// such as /dev/null, a FIFO, a socket, a folder) is refused before
// anything is written: renaming over it would replace the device node
// itself (conventions, 23).
func Write(path string, perm fs.FileMode, write func(w io.Writer) error) (err error) {
	if st, err := os.Stat(path); err == nil {
		if err := regfile.CheckMode(path, st.Mode()); err != nil {
			return fmt.Errorf("%w: refusing to replace it", err)
		}
		perm = st.Mode().Perm()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return fmt.Errorf("%s: create a temporary file in %s: %w", path, dir, unwrapPath(err))
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%s: write: %w", path, unwrapPath(err))
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("%s: chmod: %w", path, unwrapPath(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: sync: %w", path, unwrapPath(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", path, unwrapPath(err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%s: rename the temporary file over it: %w", path, unwrapPath(err))
	}
	if err := syncDir(dir); err != nil {
		// The file is complete and in place; only its durability across a
		// power loss is in doubt. Report it all the same.
		return fmt.Errorf("%s: written, but syncing the folder %s failed: %w", path, dir, err)
	}
	return nil
}

// syncDir fsyncs a folder, so a rename inside it is on disk. File systems
// that cannot sync a folder (EINVAL) are taken at their word.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return unwrapPath(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return unwrapPath(err)
	}
	return nil
}

// CheckWritable reports, before any work is done, whether Write(path, …)
// could succeed: path must be a regular file if it exists, and its folder must exist and
// accept a new file (checked by creating and removing a temporary one, which
// also catches read-only mounts and, for the size of an empty file, full
// disks). It writes nothing at path itself.
func CheckWritable(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("folder %s does not exist", dir)
	case err != nil:
		return unwrapPath(err)
	case !st.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	if st, err := os.Stat(path); err == nil {
		if err := regfile.CheckMode(path, st.Mode()); err != nil {
			return fmt.Errorf("%w: refusing to replace it", err)
		}
	}
	f, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return fmt.Errorf("cannot create a file in %s: %w", dir, unwrapPath(err))
	}
	name := f.Name()
	_, werr := f.Write([]byte{0})
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("cannot write a file in %s: %w", dir, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops *fs.PathError's operation and path (the messages above
// name the path themselves): "permission denied", not "open /x/.y.tmp-123:
// permission denied".
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && !strings.Contains(pe.Err.Error(), pe.Path) {
		return pe.Err
	}
	return err
}

// RemoveLeftovers removes the temporary files that writers killed in the
// middle of Write left in dir (.NAME.tmp-*), for the targets NAME that
// match says are its caller's, and returns the names it removed. Only
// regular files are touched. Run it only where no other process is
// writing those targets at the same time.
func RemoveLeftovers(dir string, match func(target string) bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range ents {
		n := e.Name()
		rest, ok := strings.CutPrefix(n, ".")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		i := strings.LastIndex(rest, ".tmp-")
		if i <= 0 || !match(rest[:i]) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err == nil {
			removed = append(removed, n)
		}
	}
	return removed, nil
}
