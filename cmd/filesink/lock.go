package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockState takes an exclusive lock on DIR/LOCK so that two processes never
// run on one checkpoint directory. The kernel drops the lock when the
// process dies, so a killed run never blocks the next.
func lockState(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	name := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state directory %s is in use by another filesink process", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return func() { f.Close() }, nil
}
