package filesink_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/filesink/filesink/filesink"
)

func TestCountRecords(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	zst := func(s string) []byte {
		var b bytes.Buffer
		w, _ := zstd.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	cases := []struct {
		path   string
		header bool
		data   []byte
		want   int64
	}{
		{"a/part-0.jsonl", false, []byte("{}\n{}\n{}\n"), 3},
		{"a/part-0.txt", false, []byte("x\ny\n"), 2},
		{"a/part-0.jsonl.gz", false, gz("{}\n{}\n"), 2},
		{"a/part-0.jsonl.zst", false, zst("{}\n{}\n{}\n{}\n"), 4},
		{"a/part-0.csv", false, []byte("1,\"a\nb\"\n2,c\n"), 2},
		{"a/part-0.csv", true, []byte("id,s\n1,a\n2,c\n"), 2},
		{"a/part-0.csv.gz", true, gz("id,s\n1,a\n"), 1},
		{"a/part-0.other", false, []byte("1\n2\n3\n"), 3},
	}
	for _, c := range cases {
		f := &filesink.ManifestFile{Path: c.path, PartStats: filesink.PartStats{Header: c.header}}
		got, err := filesink.CountRecords(f, bytes.NewReader(c.data))
		if err != nil || got != c.want {
			t.Errorf("%s (header %v): CountRecords = %d, %v; want %d", c.path, c.header, got, err, c.want)
		}
	}
	if _, err := filesink.CountRecords(&filesink.ManifestFile{Path: "p.csv"}, strings.NewReader("\"unterminated\n")); err == nil {
		t.Error("a malformed CSV file was counted")
	}
	if _, err := filesink.CountRecords(&filesink.ManifestFile{Path: "p.gz"}, strings.NewReader("not gzip")); err == nil {
		t.Error("a malformed gzip file was counted")
	}
}
