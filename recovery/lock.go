package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/filesink/filesink/vfs"
)

// LockFile is the file in a checkpoint directory that an open DirStore
// holds locked. It contains the process id of the holder, for messages.
const LockFile = "LOCK"

// ErrLocked is matched (errors.Is) by the error of OpenDir when another
// open DirStore, in this process or another, holds the directory.
var ErrLocked = errors.New("checkpoint store is locked")

// LockedError reports a checkpoint directory held by another open store.
type LockedError struct {
	Dir string // the checkpoint directory
	PID int    // the holder's process id, 0 when unknown
}

func (e *LockedError) Error() string {
	if e.PID == os.Getpid() {
		return fmt.Sprintf("checkpoint store %s is locked by another open store of this process (pid %d)", e.Dir, e.PID)
	}
	if e.PID > 0 {
		return fmt.Sprintf("checkpoint store %s is locked by another process (pid %d)", e.Dir, e.PID)
	}
	return fmt.Sprintf("checkpoint store %s is locked by another process", e.Dir)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// dirLock is a held lock on DIR/LOCK; the kernel drops it when the process
// dies, so a killed run never blocks the next.
type dirLock struct {
	f *os.File
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// lockDir takes the exclusive lock of a checkpoint directory on the real
// file system. Other file systems (in-memory, crash simulation) live in one
// process and take none: it returns nil, nil.
func lockDir(fsys vfs.FS, dir string) (*dirLock, error) {
	if _, ok := fsys.(vfs.OS); !ok {
		return nil, nil
	}
	name := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: lock: %w", dir, err)
	}
	held, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint store %s: lock %s: %w", dir, name, err)
	}
	if held {
		pid := readPID(f)
		f.Close()
		return nil, &LockedError{Dir: dir, PID: pid}
	}
	// The holder's pid, for the message of the next opener; best effort.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// readPID returns the pid in a lock file, 0 if it cannot be read.
func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
