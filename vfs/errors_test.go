package vfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filesink/filesink/vfs"
)

func TestWrapPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	_, openErr := os.Open(missing)
	if openErr == nil {
		t.Fatal("opening a missing file did not fail")
	}
	tooBig := &fs.PathError{Op: "write", Path: "/out/x", Err: syscall.EFBIG}
	cases := []struct {
		prefix string
		err    error
		want   string
	}{
		{"localfs: write /out/x", tooBig, "localfs: write /out/x: " + syscall.EFBIG.Error()},
		{"localfs: resume " + missing, openErr, "localfs: resume " + missing + ": " + syscall.ENOENT.Error()},
		// Another path, or the path not at the end of the prefix: kept.
		{"localfs: write /out/y", tooBig, "localfs: write /out/y: write /out/x: " + syscall.EFBIG.Error()},
		{"localfs: commit /out/x (staging)", tooBig, "localfs: commit /out/x (staging): write /out/x: " + syscall.EFBIG.Error()},
		// A path error below other context: kept whole.
		{"localfs: write /out/x", fmt.Errorf("flush: %w", tooBig), "localfs: write /out/x: flush: write /out/x: " + syscall.EFBIG.Error()},
		{"s3: put", errors.New("boom"), "s3: put: boom"},
	}
	for _, c := range cases {
		got := vfs.WrapPath(c.prefix, c.err)
		if got.Error() != c.want {
			t.Errorf("WrapPath(%q, %q) = %q, want %q", c.prefix, c.err, got, c.want)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("WrapPath(%q, %q) does not wrap the error", c.prefix, c.err)
		}
	}
	var pe *fs.PathError
	if got := vfs.WrapPath("localfs: write /out/x", tooBig); !errors.As(got, &pe) || !errors.Is(got, syscall.EFBIG) {
		t.Errorf("WrapPath lost the *fs.PathError or its errno: %#v", got)
	}
	if vfs.WrapPath("x", nil) != nil {
		t.Error("WrapPath of nil is not nil")
	}
}
