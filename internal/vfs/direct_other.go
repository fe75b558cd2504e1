//go:build !linux

package vfs

import (
	"fmt"
	"os"
)

func openDirect(name string) (*os.File, error) {
	return nil, fmt.Errorf("%s: %w", name, ErrNoDirectIO)
}
