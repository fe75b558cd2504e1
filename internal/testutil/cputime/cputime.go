// Package cputime reads the CPU time of the process, for benchmarks that
// report CPU per operation beside wall time.
package cputime

import "time"

// Process returns the CPU time the process has used so far, user and
// system, over all its threads (the garbage collector's included). A nil
// error means the figure is the operating system's.
func Process() (time.Duration, error) { return process() }
