package bucketing

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// MaxPathLen is the longest bucket path, in bytes, that Sanitize accepts.
	MaxPathLen = 1024
	// MaxComponentLen is the longest path component, in bytes, that Sanitize
	// accepts (the NAME_MAX of common filesystems).
	MaxComponentLen = 255
)

// Sanitize checks a bucket path and returns it cleaned.
//
// The empty string (the base directory) is returned as is. Otherwise the
// path must be relative and slash-separated. One trailing '/' is removed.
// Sanitize rejects, with an *InvalidBucketError (matching ErrInvalidBucket):
//
//   - an absolute path (leading '/') or one that starts with a Windows drive
//     ("C:");
//   - an empty component ("a//b");
//   - a ".." component, and any component that starts with '.' or '_': such
//     names are reserved for staging and state files and never appear in
//     finished output;
//   - a backslash, a NUL or any other control character (C0, DEL or C1),
//     and invalid UTF-8;
//   - a path longer than MaxPathLen bytes or a component longer than
//     MaxComponentLen bytes.
//
// A nil error guarantees that the result is "" or a local path in the sense
// of filepath.IsLocal, and that Sanitize returns it unchanged.
func Sanitize(bucket string) (string, error) {
	if bucket == "" {
		return "", nil
	}
	if bucket[0] == '/' {
		return "", invalid(bucket, "absolute path")
	}
	if len(bucket) >= 2 && bucket[1] == ':' && isLetter(bucket[0]) {
		return "", invalid(bucket, "starts with a Windows drive")
	}
	p := strings.TrimSuffix(bucket, "/")
	if len(p) > MaxPathLen {
		return "", invalid(bucket, "longer than 1024 bytes")
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c != '/' {
				if c < 0x20 || c == 0x7f {
					return "", invalid(bucket, fmt.Sprintf("control character %U at byte %d", c, i))
				}
				if c == '\\' {
					return "", invalid(bucket, fmt.Sprintf("backslash at byte %d", i))
				}
				if c >= utf8.RuneSelf {
					r, size := utf8.DecodeRuneInString(p[i:])
					if r == utf8.RuneError && size == 1 {
						return "", invalid(bucket, fmt.Sprintf("invalid UTF-8 at byte %d", i))
					}
					if r >= 0x80 && r <= 0x9f {
						return "", invalid(bucket, fmt.Sprintf("control character %U at byte %d", r, i))
					}
					i += size - 1
				}
				continue
			}
		}
		comp := p[start:i]
		if reason := checkComponent(comp); reason != "" {
			return "", invalid(bucket, reason)
		}
		start = i + 1
	}
	return p, nil
}

// checkComponent returns why comp is not a valid path component, or "".
func checkComponent(comp string) string {
	switch {
	case comp == "":
		return "empty component"
	case comp == "..":
		return `".." component`
	case comp[0] == '.':
		return "component " + quoteTrunc(comp) + " starts with '.' (reserved for staging and state files)"
	case comp[0] == '_':
		return "component " + quoteTrunc(comp) + " starts with '_' (reserved for staging and state files)"
	case len(comp) > MaxComponentLen:
		return "component longer than 255 bytes"
	}
	return ""
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func invalid(path, reason string) error {
	return &InvalidBucketError{Path: path, Reason: reason}
}
