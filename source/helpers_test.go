package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/filesink/filesink/source"
)

// rec is a record copied out of a source.
type rec struct {
	Value  string
	Origin string
}

// readN reads up to n records (n < 0: all) and reports whether io.EOF was
// reached.
func readN(t testing.TB, s source.Source, n int) ([]rec, bool) {
	t.Helper()
	var out []rec
	for n < 0 || len(out) < n {
		r, err := s.Next(context.Background())
		if err == io.EOF {
			return out, true
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(out), err)
		}
		out = append(out, rec{string(r.Value), r.Origin.String()})
	}
	return out, false
}

func readAll(t testing.TB, s source.Source) []rec {
	t.Helper()
	out, _ := readN(t, s, -1)
	return out
}

// writeTree writes files (slash paths -> contents) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// refLines is the reference line splitter: the records of one input.
func refLines(name, data string) []rec {
	var out []rec
	parts := strings.Split(data, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		p = strings.TrimSuffix(p, "\r")
		if p != "" {
			out = append(out, rec{p, name + ":" + strconv.Itoa(i+1)})
		}
	}
	return out
}

func equalRecs(t testing.TB, what string, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d records, want %d\n got: %q\nwant: %q", what, len(got), len(want), got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: record %d = %q, want %q", what, i, got[i], want[i])
			return
		}
	}
}

func mustErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v: want one matching %v", err, target)
	}
}

func TestOriginFormats(t *testing.T) {
	o := source.Origin{Name: "in/a.txt", Num: 17}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "origin", o)
	if !strings.Contains(buf.String(), `"origin":"in/a.txt:17"`) {
		t.Errorf("slog JSON: %s", buf.String())
	}
	if got := fmt.Sprintf("%s %v", o, o); got != "in/a.txt:17 in/a.txt:17" {
		t.Errorf("fmt: %q", got)
	}
	if got := string(o.AppendTo([]byte("at "))); got != "at in/a.txt:17" {
		t.Errorf("AppendTo: %q", got)
	}
}
