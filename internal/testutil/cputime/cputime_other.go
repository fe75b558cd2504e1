//go:build !unix

package cputime

import (
	"errors"
	"time"
)

func process() (time.Duration, error) {
	return 0, errors.New("cputime: the process's CPU time is read on Unix systems only")
}
