package recovery

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/filesink/filesink/vfs"
)

// LockFile is the file in a checkpoint directory that an open DirStore
// holds locked. It names the holder, for messages: its process id on the
// first line, then "host H" and "started T" lines (RFC 3339); a lock file
// written by an older filesink holds the pid alone.
const LockFile = "LOCK"

// ErrLocked is matched (errors.Is) by the error of OpenDir when another
// open DirStore, in this process or another, holds the directory.
var ErrLocked = errors.New("checkpoint store is locked")

// LockInfo names the holder of a checkpoint directory's lock, as its lock
// file says.
type LockInfo struct {
	PID     int    // the holder's process id, 0 when unknown
	Host    string // the holder's host name, "" when unknown
	Started string // when it took the lock (RFC 3339), "" when unknown
}

// String is "host H, pid P, started T", leaving out what is unknown.
func (h LockInfo) String() string {
	var parts []string
	if h.Host != "" {
		parts = append(parts, "host "+h.Host)
	}
	if h.PID > 0 {
		parts = append(parts, "pid "+strconv.Itoa(h.PID))
	}
	if h.Started != "" {
		parts = append(parts, "started "+h.Started)
	}
	if len(parts) == 0 {
		return "holder unknown"
	}
	return strings.Join(parts, ", ")
}

// LockedError reports a checkpoint directory held by another open store.
type LockedError struct {
	Dir string // the checkpoint directory
	LockInfo
}

func (e *LockedError) Error() string {
	if e.PID == os.Getpid() {
		return fmt.Sprintf("checkpoint store %s is locked by another open store of this process (pid %d)", e.Dir, e.PID)
	}
	if e.PID > 0 {
		return fmt.Sprintf("checkpoint store %s is locked by another process (%s)", e.Dir, e.LockInfo)
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

// Lock contention: a reader's probe (LockHolder) holds the lock for the
// instant of one system call, and a holder writes its name right after it
// took the lock. An opener that finds the lock held, or the holder's name
// not yet written, looks again lockTries times, lockPause apart, before
// it gives up.
const (
	lockTries = 20
	lockPause = 5 * time.Millisecond
)

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
	for try := 0; ; try++ {
		held, err := lockFile(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("checkpoint store %s: lock %s: %w", dir, name, err)
		}
		if !held {
			break
		}
		if try == lockTries {
			info := readLockInfo(f)
			f.Close()
			return nil, &LockedError{Dir: dir, LockInfo: info}
		}
		time.Sleep(lockPause)
	}
	// The holder's name, for the message of the next opener; best effort.
	// Written over the old one, then cut to its length: the file is never
	// empty in between.
	host, _ := os.Hostname()
	info := fmt.Sprintf("%d\nhost %s\nstarted %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if _, err := f.WriteAt([]byte(info), 0); err == nil {
		_ = f.Truncate(int64(len(info)))
	}
	return &dirLock{f: f}, nil
}

// readLockInfo returns what a held lock file says of its holder, looking
// again for a while when it names no pid yet (a holder that has just
// taken the lock).
func readLockInfo(f *os.File) LockInfo {
	var info LockInfo
	for try := 0; try <= lockTries; try++ {
		if info = parseLockInfo(f); info.PID > 0 {
			break
		}
		time.Sleep(lockPause)
	}
	return info
}

// parseLockInfo reads a lock file: a pid on the first line, then optional
// "host H" and "started T" lines. A pid that does not parse is 0.
func parseLockInfo(f *os.File) LockInfo {
	b := make([]byte, 1024)
	n, _ := f.ReadAt(b, 0)
	lines := strings.Split(string(b[:n]), "\n")
	var info LockInfo
	if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err == nil && pid > 0 {
		info.PID = pid
	}
	for _, l := range lines[1:] {
		if v, ok := strings.CutPrefix(l, "host "); ok {
			info.Host = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(l, "started "); ok {
			info.Started = strings.TrimSpace(v)
		}
	}
	return info
}

// LockHolder reports whether an open DirStore (a running filesink) holds
// the checkpoint directory dir, without taking it: it opens DIR/LOCK
// read-only (never creating it) and tests the lock with a shared lock
// held for the instant of one system call, which an opener that comes
// at that instant waits out (OpenDir looks again for a while). A nil
// error with a nil holder means no open store held dir at that instant
// (or the system has no file locks: see lockFile); a non-nil holder is
// what its lock file says. An error means the test could not be made.
// Safe for concurrent use.
func LockHolder(ctx context.Context, dir string) (*LockInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, LockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: test the lock: %w", dir, err)
	}
	defer f.Close()
	held, err := probeFile(f)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: test the lock: %w", dir, err)
	}
	if !held {
		return nil, nil
	}
	info := readLockInfo(f)
	return &info, nil
}
