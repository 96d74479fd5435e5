// Package regfile opens the files dml reads — data, weights, checkpoints,
// configurations — only when they are regular files. A path that names a
// FIFO, a device, a socket or a folder (directly or through a symlink) is
// refused by name, at once: opening a FIFO for reading would block until a
// writer came, and a device such as /dev/zero or /dev/urandom never ends.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// Kind names what a file of mode m is: "a folder", "a FIFO", "a device"…
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

// Check returns nil when path is a regular file (following symlinks), an
// error wrapping ErrNotRegular that names what it is otherwise, and the
// error of os.Stat when it cannot be looked at (fs.ErrNotExist included).
func Check(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return checkMode(path, st.Mode())
}

// CheckMode is Check for a mode already looked up (os.Stat's, which
// follows symlinks).
func CheckMode(path string, m fs.FileMode) error { return checkMode(path, m) }

func checkMode(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	return &notRegular{path, Kind(m)}
}

// notRegular says what path is instead: "/dev/null is a character device,
// not a regular file".
type notRegular struct{ path, kind string }

func (e *notRegular) Error() string { return e.path + " is " + e.kind + ", not a regular file" }
func (e *notRegular) Unwrap() error { return ErrNotRegular }

// Open opens path for reading when it is a regular file. The open itself
// does not block (O_NONBLOCK; a FIFO without a writer would), and what was
// opened is checked, not what a look before the open saw.
func Open(path string) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return adopt(fd, path, nil)
}

// adopt makes fd, opened O_NONBLOCK at path, an *os.File if it is a
// regular file, after prepare (if not nil); else it closes fd and says
// what path is.
func adopt(fd int, path string, prepare func(fd int) error) (*os.File, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, checkMode(path, modeOf(st.Mode))
	}
	err := syscall.SetNonblock(fd, false)
	if err == nil && prepare != nil {
		err = prepare(fd)
	}
	if err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ReadFile reads a regular file of at most limit bytes (limit ≤ 0: any
// size), refusing a larger one by its size before reading it.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if limit > 0 && st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d such a file can be", path, st.Size(), limit)
	}
	// Read at most limit+1 bytes: a file that grows while it is read is
	// still bounded.
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past the %d bytes such a file can be while it was read", path, limit)
	}
	return b, nil
}

// modeOf turns a stat mode's file type into an fs.FileMode's.
func modeOf(m uint32) fs.FileMode {
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	}
	return fs.ModeIrregular
}

// Create creates or truncates path for writing, as os.Create does, when it
// is missing or a regular file; anything else at path is refused by name
// and left as it was (a device is not truncated, a FIFO does not block).
func Create(path string) (*os.File, error) {
	if err := Check(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: path, Err: err}
	}
	// Truncated only once it is known to be a regular file.
	return adopt(fd, path, func(fd int) error { return syscall.Ftruncate(fd, 0) })
}

// WriteFile is os.WriteFile through Create.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
