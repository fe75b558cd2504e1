//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package recovery

import "os"

// lockFile is the fallback of systems without flock or LockFileEx (for
// example plan9, js, wasip1, solaris): it takes no lock, so on them OpenDir
// does not keep a second process off a checkpoint directory.
func lockFile(*os.File) (held bool, err error) { return false, nil }

// probeFile: without locks, no directory is ever held.
func probeFile(*os.File) (held bool, err error) { return false, nil }
