//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package s3

// processAlive cannot tell on this system: every holder counts as alive,
// so a lease left by a dead process is taken over when it is stale.
func processAlive(int) bool { return true }
