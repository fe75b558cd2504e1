package bucketing

import "testing"

// HiveUnescape reads back what HiveEscape wrote, C1 controls included,
// and refuses a cut or non-hex escape.
func TestHiveEscapeRoundTrip(t *testing.T) {
	for _, s := range []string{"plain", "a/b=c", "100%", "x:y?z#", "tab\there", "\u0085next", "é"} {
		got, err := HiveUnescape(HiveEscape(s))
		if err != nil || got != s {
			t.Errorf("%q -> %q -> %q, %v", s, HiveEscape(s), got, err)
		}
	}
	for _, bad := range []string{"a%2", "a%zz", "%"} {
		if _, err := HiveUnescape(bad); err == nil {
			t.Errorf("HiveUnescape(%q) accepted", bad)
		}
	}
}
