package bucketing

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSanitizeAccepts(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a", "a"},
		{"a/", "a"},
		{"a/b/c", "a/b/c"},
		{"a/b/c/", "a/b/c"},
		{"2024-05-01--12", "2024-05-01--12"},
		{"dt=2024-05-01/hour=12", "dt=2024-05-01/hour=12"},
		{"a.b/c..d/e.", "a.b/c..d/e."},
		{"a_b/c-", "a_b/c-"},
		{"12:30", "12:30"},
		{"a b", "a b"},
		{"Zürich/😀", "Zürich/😀"},
		{"p=a%2Fb", "p=a%2Fb"},
		{"-1", "-1"},
		{"~", "~"},
		{strings.Repeat("x", 255), strings.Repeat("x", 255)},
		{strings.Repeat(strings.Repeat("x", 255)+"/", 3) + "abc", strings.Repeat(strings.Repeat("x", 255)+"/", 3) + "abc"}, // 771 bytes
		{strings.Repeat("x/", 511) + "xx", strings.Repeat("x/", 511) + "xx"},                                               // 1024 bytes
		{strings.Repeat("x/", 511) + "xx/", strings.Repeat("x/", 511) + "xx"},                                              // 1024 after the trim
	}
	for _, tt := range tests {
		got, err := Sanitize(tt.in)
		if err != nil {
			t.Errorf("Sanitize(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again, err := Sanitize(got); err != nil || again != got {
			t.Errorf("Sanitize(%q) = %q, %v: not idempotent", got, again, err)
		}
	}
}

func TestSanitizeRejects(t *testing.T) {
	tests := []struct{ in, reason string }{
		{"/", "absolute path"},
		{"/a", "absolute path"},
		{"//a", "absolute path"},
		{"C:", "Windows drive"},
		{"c:/x", "Windows drive"},
		{"a//b", "empty component"},
		{"a//", "empty component"},
		{"..", `".." component`},
		{"../a", `".." component`},
		{"a/..", `".." component`},
		{"a/../b", `".." component`},
		{".", "starts with '.'"},
		{"./a", "starts with '.'"},
		{"a/./b", "starts with '.'"},
		{".hidden", "starts with '.'"},
		{"a/.part-0.inprogress", "starts with '.'"},
		{"_state", "starts with '_'"},
		{"a/_pending/b", "starts with '_'"},
		{"a\x00b", "control character"},
		{"a\nb", "control character"},
		{"a\tb", "control character"},
		{"a\x7fb", "control character"},
		{"a\u0085b", "control character"},
		{"a\\b", "backslash"},
		{`..\x`, "backslash"},
		{"a\xffb", "invalid UTF-8"},
		{strings.Repeat("x", 256), "longer than 255"},
		{strings.Repeat("x/", 512) + "x", "longer than 1024"},
		{strings.Repeat("x", 2000), "longer than 1024"},
	}
	for _, tt := range tests {
		got, err := Sanitize(tt.in)
		if err == nil {
			t.Errorf("Sanitize(%q) = %q, want an error", tt.in, got)
			continue
		}
		if got != "" {
			t.Errorf("Sanitize(%q) = %q with an error", tt.in, got)
		}
		if !errors.Is(err, ErrInvalidBucket) {
			t.Errorf("Sanitize(%q): error %v does not match ErrInvalidBucket", tt.in, err)
		}
		var ib *InvalidBucketError
		if !errors.As(err, &ib) || ib.Path != tt.in {
			t.Errorf("Sanitize(%q): error %#v does not carry the path", tt.in, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.reason) {
			t.Errorf("Sanitize(%q): error %q does not say %q", tt.in, msg, tt.reason)
		}
		if len(tt.in) <= maxQuoted && !strings.Contains(msg, strconv.Quote(tt.in)) {
			t.Errorf("Sanitize(%q): error %q does not quote the path", tt.in, msg)
		}
		if len(msg) > 2*maxQuoted+200 {
			t.Errorf("Sanitize(%q): error message is %d bytes long", tt.in, len(msg))
		}
	}
}

// checkSanitized checks the properties of a path accepted by Sanitize.
func checkSanitized(t *testing.T, in, out string) {
	t.Helper()
	if out == "" {
		if strings.TrimSuffix(in, "/") != "" {
			t.Fatalf("Sanitize(%q) = \"\"", in)
		}
		return
	}
	if !filepath.IsLocal(out) {
		t.Fatalf("Sanitize(%q) = %q: not filepath.IsLocal", in, out)
	}
	if filepath.IsAbs(out) || strings.HasPrefix(out, "/") {
		t.Fatalf("Sanitize(%q) = %q: absolute", in, out)
	}
	if filepath.ToSlash(filepath.Clean(out)) != out {
		t.Fatalf("Sanitize(%q) = %q: not clean", in, out)
	}
	for _, c := range strings.Split(out, "/") {
		if c == "" || c == ".." || c[0] == '.' || c[0] == '_' {
			t.Fatalf("Sanitize(%q) = %q: bad component %q", in, out, c)
		}
		if len(c) > MaxComponentLen {
			t.Fatalf("Sanitize(%q) = %q: component too long", in, out)
		}
	}
	if len(out) > MaxPathLen || strings.ContainsAny(out, "\x00\\") {
		t.Fatalf("Sanitize(%q) = %q: too long, NUL or backslash", in, out)
	}
	again, err := Sanitize(out)
	if err != nil || again != out {
		t.Fatalf("Sanitize(%q) = %q, %v: not idempotent", out, again, err)
	}
}
