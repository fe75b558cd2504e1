package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func openDirect(name string) (*os.File, error) {
	d, err := os.OpenFile(name, os.O_WRONLY|syscall.O_DIRECT, 0)
	if errors.Is(err, syscall.EINVAL) {
		return nil, fmt.Errorf("%s: %w", name, ErrNoDirectIO)
	}
	return d, err
}
