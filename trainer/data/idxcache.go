package data

import (
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dml-project/dml/internal/regfile"
)

// A cache of decompressed IDX image files (--data-cache): reading
// Fashion-MNIST's training images means inflating 26 MB of gzip into 47
// MB, about a third of a second on the 2-core machines, and a restarted
// job (dml launch, after a rank died) reads them again on every rank.
// With a cache folder the first reader writes the inflated file there
// (atomically, under a name that the source's path, size, modification
// time and inode fix), and later readers stream that file instead: the
// same bytes, read without inflating. A cached file that is not whole is
// removed and the source read again; a source that is not gzip is read
// as it is.

// WithCache returns a copy of s that reads its images through the cache
// folder dir ("": none).
func (s *IDXSource) WithCache(dir string) *IDXSource {
	c := *s
	c.cache = dir
	return &c
}

// imagesFile is the file to stream the images from: the cached inflated
// copy when there is (or can be made) one, else the source.
func (s *IDXSource) imagesFile() string {
	if s.cache == "" {
		return s.images
	}
	p, err := cachedIDX(s.images, s.cache)
	if err != nil || p == s.images {
		return s.images
	}
	// An inflated copy holds the header (4 bytes, 4 per dimension) and
	// the pixels, no more and no less: else it is not whole (it was
	// written by a rename, so something else changed it).
	want := int64(4 + 4*len(s.dims))
	pixels := int64(1)
	for _, d := range s.dims {
		pixels *= int64(d)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != want+pixels {
		os.Remove(p)
		return s.images
	}
	return p
}

// cachedIDX returns the cached inflated copy of the gzip file src in dir,
// making it first if there is none; src itself when it is not gzip.
func cachedIDX(src, dir string) (string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	abs, _ := filepath.Abs(src)
	key := crc64.New(crcTable)
	fmt.Fprintf(key, "%s\x00%d\x00%d", abs, st.Size(), st.ModTime().UnixNano())
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fmt.Fprintf(key, "\x00%d\x00%d", sys.Dev, sys.Ino)
	}
	name := strings.TrimSuffix(filepath.Base(src), ".gz")
	path := filepath.Join(dir, fmt.Sprintf("%s.%016x.idx", name, key.Sum64()))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	f, err := regfile.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	r, gz, err := maybeGunzip(f)
	if err != nil {
		return "", err
	}
	if !gz {
		return src, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil { // as readable as a file written by os.WriteFile
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}
