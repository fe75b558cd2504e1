package source_test

import (
	"testing"

	"github.com/filesink/filesink/source"
)

// TestLocalPath: the directory LocalPath names is the one Open reads, for
// every spelling of the directory source, and none for the other sources.
func TestLocalPath(t *testing.T) {
	for _, c := range []struct {
		uri, want string
		ok        bool
	}{
		{"in", "in", true},
		{"/data/in", "/data/in", true},
		{"file:///data/in", "/data/in", true},
		{"file://in", "in", true},
		{"file:in", "in", true},
		{"FILE:///data/in", "/data/in", true},
		{"file://", "", false},
		{"-", "", false},
		{"stdin://", "", false},
		{"gen://?count=1", "", false},
		{"kafka://h:9092/t", "", false},
		{"", "", false},
	} {
		if got, ok := source.LocalPath(c.uri); got != c.want || ok != c.ok {
			t.Errorf("LocalPath(%q) = %q, %v; want %q, %v", c.uri, got, ok, c.want, c.ok)
		}
	}
}
