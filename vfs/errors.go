package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// WrapPath returns err with the context prefix in front, as
// fmt.Errorf("%s: %w", prefix, err) does, except that when prefix already
// ends with the path of the *fs.PathError that err's message starts with
// ("write /out/x: file too large"), the error's own operation and path are
// left out, so that the path is named once:
// WrapPath("localfs: write /out/x", err) reads "localfs: write /out/x: file
// too large", not "localfs: write /out/x: write /out/x: file too large".
// The result wraps err (errors.Is and errors.As see it whole). A nil err
// gives nil.
func WrapPath(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path != "" && strings.HasSuffix(prefix, pe.Path) {
		if rest, ok := strings.CutPrefix(err.Error(), pe.Op+" "+pe.Path+": "); ok {
			return &prefixed{msg: prefix + ": " + rest, err: err}
		}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// prefixed is an error with a message of its own that wraps another.
type prefixed struct {
	msg string
	err error
}

func (e *prefixed) Error() string { return e.msg }
func (e *prefixed) Unwrap() error { return e.err }
