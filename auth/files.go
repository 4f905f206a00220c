package auth

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// maxFileBytes bounds the tokens and policy files: they are read on every
// change, and a file that grew by mistake (a log redirected onto it) must not
// be read into memory whole.
const maxFileBytes = 4 << 20

// stamp is what change detection compares. os.Stat follows symlinks, so a
// Kubernetes Secret or ConfigMap mount, which swaps the "..data" symlink to a
// new directory, shows up as a new inode even when size and mtime agree.
type stamp struct {
	size  int64
	mtime time.Time
	inode uint64
	sum   [sha256.Size]byte // of the content, so a touch without a change reloads nothing
}

// missingStamp is what polling records for a file that is not there; no
// file that exists has a negative size.
func missingStamp() stamp { return stamp{size: -1} }

// statFile returns the stamp's stat part; the sum is left zero.
func statFile(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	s := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = uint64(st.Ino)
	}
	return s, nil
}

func (s stamp) sameStat(o stamp) bool {
	return s.size == o.size && s.mtime.Equal(o.mtime) && s.inode == o.inode
}

// readFile reads a watched file and returns its content with a full stamp.
// The stat is taken before the read: if the file changes in between, the
// next poll sees a newer stamp and reads it again, never the reverse.
func readFile(path string) ([]byte, stamp, error) {
	st, err := statFile(path)
	if err != nil {
		return nil, stamp{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, stamp{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, stamp{}, err
	}
	if len(data) > maxFileBytes {
		return nil, stamp{}, fmt.Errorf("%s is larger than %d bytes", path, maxFileBytes)
	}
	st.sum = sha256.Sum256(data)
	return data, st, nil
}
