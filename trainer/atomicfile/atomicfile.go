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
func Write(path string, perm fs.FileMode, write func(w io.Writer) error) (err error) {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s is a folder, not a file", path)
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
// could succeed: path must not be a folder, and its folder must exist and
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
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a folder, not a file", path)
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
