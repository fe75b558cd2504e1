package filesink_test

import (
	"bytes"
	stdgzip "compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

func TestJSONLinesEncode(t *testing.T) {
	tests := []struct {
		name    string
		record  string
		wantErr bool
	}{
		{"object", `{"id":1,"key":"a"}`, false},
		{"array", `[1,2,3]`, false},
		{"string", `"just a string"`, false},
		{"number", `-12.5e3`, false},
		{"null", `null`, false},
		{"bool", `true`, false},
		{"surrounding spaces kept", ` {"a": [1, {"b": null}]} `, false},
		{"escaped newline in string", `{"a":"line1\nline2"}`, false},
		{"unicode", `{"a":"héllo ☃"}`, false},
		{"empty", ``, true},
		{"blank", `   `, true},
		{"truncated object", `{"id":1`, true},
		{"two values", `{"a":1}{"b":2}`, true},
		{"single quotes", `{'a':1}`, true},
		{"trailing comma", `{"a":1,}`, true},
		{"bare word", `not json`, true},
		{"raw newline as whitespace", "{\"a\":\n1}", true},
		{"trailing newline", "{\"a\":1}\n", true},
		{"raw control char in string", "{\"a\":\"x\ty\"}", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prev\n")
			got, err := filesink.JSONLines{}.Encode(bytes.Clone(prefix), []byte(tc.record))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Encode(%q) = %q, want an error", tc.record, got)
				}
				if !bytes.Equal(got, prefix) {
					t.Errorf("Encode(%q) with an error changed dst to %q", tc.record, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Encode(%q): %v", tc.record, err)
			}
			if want := string(prefix) + tc.record + "\n"; string(got) != want {
				t.Errorf("Encode(%q) = %q, want %q", tc.record, got, want)
			}
		})
	}
	if h := (filesink.JSONLines{}).Header(); h != nil {
		t.Errorf("JSONLines header = %q, want none", h)
	}
	if e := (filesink.JSONLines{}).Extension(); e != ".jsonl" {
		t.Errorf("JSONLines extension = %q", e)
	}
}

// TestJSONLinesInvalidUTF8: a string with bytes that are not UTF-8 is
// rejected by default; with ReplaceInvalidUTF8 each such byte becomes
// U+FFFD, so that the line decodes to what encoding/json makes of the
// original, and readers that insist on UTF-8 read it.
func TestJSONLinesInvalidUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"{\"a\":\"x\xffy\"}", "{\"a\":\"x\uFFFDy\"}"},
		{"{\"a\":\"\xe6\x9d\"}", "{\"a\":\"\uFFFD\uFFFD\"}"}, // one per byte, as encoding/json
		{"{\"k\xc3\":[\"é\xed\xa0\x80\",1]}", "{\"k\uFFFD\":[\"é\uFFFD\uFFFD\uFFFD\",1]}"},
	} {
		prefix := []byte("prev\n")
		got, err := filesink.JSONLines{}.Encode(bytes.Clone(prefix), []byte(c.in))
		if !errors.Is(err, filesink.ErrInvalidUTF8) || !bytes.Equal(got, prefix) {
			t.Errorf("reject: Encode(%q) = %q, %v; want ErrInvalidUTF8 and dst unchanged", c.in, got, err)
		}
		if err == nil || !strings.Contains(err.Error(), "invalid UTF-8") {
			t.Errorf("reject: error %v does not say invalid UTF-8", err)
		}
		enc := filesink.JSONLines{InvalidUTF8: filesink.ReplaceInvalidUTF8}
		got, err = enc.Encode(bytes.Clone(prefix), []byte(c.in))
		if err != nil {
			t.Fatalf("replace: Encode(%q): %v", c.in, err)
		}
		line := bytes.TrimSuffix(bytes.TrimPrefix(got, prefix), []byte("\n"))
		if string(line) != c.want || !utf8.Valid(line) || !json.Valid(line) {
			t.Errorf("replace: Encode(%q) = %q, want %q", c.in, line, c.want)
		}
		var orig, repaired any
		if err := json.Unmarshal([]byte(c.in), &orig); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(line, &repaired); err != nil || !reflect.DeepEqual(orig, repaired) {
			t.Errorf("replace: %q decodes to %v (%v), encoding/json makes %v of the original", line, repaired, err, orig)
		}
	}
	// Replacing repairs the encoding only: other errors still reject.
	enc := filesink.JSONLines{InvalidUTF8: filesink.ReplaceInvalidUTF8}
	for _, in := range []string{"{\"a\":\"\xff\"", "{\"a\":\xff}", "{\"a\":\"\xff\"}\n"} {
		if got, err := enc.Encode(nil, []byte(in)); err == nil || errors.Is(err, filesink.ErrInvalidUTF8) {
			t.Errorf("replace: Encode(%q) = %q, %v; want a syntax error", in, got, err)
		}
	}
	for _, name := range []string{"reject", "replace"} {
		p, err := filesink.ParseInvalidUTF8(name)
		if err != nil || p.String() != name {
			t.Errorf("ParseInvalidUTF8(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := filesink.ParseInvalidUTF8("ignore"); err == nil {
		t.Error("ParseInvalidUTF8(ignore): no error")
	}
}

func TestTextEncode(t *testing.T) {
	tests := []struct {
		record  string
		want    string
		wantErr bool
	}{
		{"hello world", "hello world\n", false},
		{"", "\n", false},
		{`not json {`, "not json {\n", false},
		{"tab\tand\rcr", "tab\tand\rcr\n", false},
		{"two\nlines", "", true},
		{"\n", "", true},
	}
	for _, tc := range tests {
		got, err := filesink.Text{}.Encode(nil, []byte(tc.record))
		if tc.wantErr {
			if err == nil {
				t.Errorf("Text.Encode(%q) = %q, want an error", tc.record, got)
			}
			if len(got) != 0 {
				t.Errorf("Text.Encode(%q) with an error returned %q", tc.record, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("Text.Encode(%q) = %q, %v; want %q", tc.record, got, err, tc.want)
		}
	}
	if e := (filesink.Text{}).Extension(); e != ".txt" {
		t.Errorf("Text extension = %q", e)
	}
	if h := (filesink.Text{}).Header(); h != nil {
		t.Errorf("Text header = %q", h)
	}
}

// readCSV parses one encoded CSV row (which may span lines when quoted).
func readCSV(t *testing.T, b []byte) [][]string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("encoding/csv cannot read %q: %v", b, err)
	}
	return rows
}

func TestCSVEncode(t *testing.T) {
	tests := []struct {
		name    string
		enc     filesink.CSV
		record  string
		raw     string   // exact encoding, if set
		want    []string // cells as a CSV reader sees them
		wantErr string   // substring of the error
	}{
		{name: "sorted keys", enc: filesink.CSV{}, record: `{"b":"x","a":1,"c":true}`, raw: "1,x,true\n", want: []string{"1", "x", "true"}},
		{name: "columns order", enc: filesink.CSV{Columns: []string{"c", "a", "b"}}, record: `{"a":1,"b":"x","c":false}`, raw: "false,1,x\n", want: []string{"false", "1", "x"}},
		{name: "missing column empty", enc: filesink.CSV{Columns: []string{"a", "b", "c"}}, record: `{"a":1,"c":3}`, raw: "1,,3\n", want: []string{"1", "", "3"}},
		{name: "null empty", enc: filesink.CSV{Columns: []string{"a", "b"}}, record: `{"a":null,"b":"y"}`, raw: ",y\n", want: []string{"", "y"}},
		{name: "comma quoted", enc: filesink.CSV{Columns: []string{"a"}}, record: `{"a":"x,y"}`, raw: "\"x,y\"\n", want: []string{"x,y"}},
		{name: "quote doubled", enc: filesink.CSV{Columns: []string{"a"}}, record: `{"a":"say \"hi\""}`, raw: "\"say \"\"hi\"\"\"\n", want: []string{`say "hi"`}},
		{name: "newline quoted", enc: filesink.CSV{Columns: []string{"a", "b"}}, record: `{"a":"l1\nl2","b":2}`, raw: "\"l1\nl2\",2\n", want: []string{"l1\nl2", "2"}},
		{name: "numbers keep JSON text", enc: filesink.CSV{Columns: []string{"a", "b", "c"}}, record: `{"a":1e3,"b":-0.50,"c":12345678901234567890}`, raw: "1e3,-0.50,12345678901234567890\n", want: []string{"1e3", "-0.50", "12345678901234567890"}},
		{name: "nested as JSON", enc: filesink.CSV{Columns: []string{"o", "l"}}, record: `{"o":{"x":[1,2]},"l":["a","b"]}`, want: []string{`{"x":[1,2]}`, `["a","b"]`}},
		{name: "unicode escape decoded", enc: filesink.CSV{Columns: []string{"a"}}, record: `{"a":"caf\u00e9"}`, raw: "café\n", want: []string{"café"}},
		{name: "empty object", enc: filesink.CSV{}, record: `{}`, want: []string{""}},
		{name: "extra field", enc: filesink.CSV{Columns: []string{"a"}}, record: `{"a":1,"zz":2}`, wantErr: `"zz"`},
		{name: "not an object", enc: filesink.CSV{}, record: `[1,2]`, wantErr: "object"},
		{name: "invalid JSON", enc: filesink.CSV{}, record: `{"a":`, wantErr: "JSON"},
		{name: "string not object", enc: filesink.CSV{Columns: []string{"a"}}, record: `"a"`, wantErr: "object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.enc.Encode([]byte("keep"), []byte(tc.record))
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Encode(%s) = %q, want an error", tc.record, got)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Encode(%s) error %q does not mention %q", tc.record, err, tc.wantErr)
				}
				if string(got) != "keep" {
					t.Errorf("Encode with an error changed dst to %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Encode(%s): %v", tc.record, err)
			}
			row, ok := bytes.CutPrefix(got, []byte("keep"))
			if !ok {
				t.Fatalf("Encode did not append to dst: %q", got)
			}
			if tc.raw != "" && string(row) != tc.raw {
				t.Errorf("Encode(%s) = %q, want %q", tc.record, row, tc.raw)
			}
			if tc.want[0] == "" && len(tc.want) == 1 && string(row) == "\n" {
				return // encoding/csv skips empty lines; "\n" is the row of one empty cell
			}
			rows := readCSV(t, row)
			if len(rows) != 1 {
				t.Fatalf("Encode(%s) = %q: %d rows, want 1", tc.record, row, len(rows))
			}
			if strings.Join(rows[0], "\x00") != strings.Join(tc.want, "\x00") {
				t.Errorf("Encode(%s) cells = %q, want %q", tc.record, rows[0], tc.want)
			}
		})
	}
}

func TestCSVHeader(t *testing.T) {
	tests := []struct {
		enc  filesink.CSV
		want string
	}{
		{filesink.CSV{Columns: []string{"id", "name, full", "q\"x"}, HeaderRow: true}, "id,\"name, full\",\"q\"\"x\"\n"},
		{filesink.CSV{Columns: []string{"id"}}, ""},
		{filesink.CSV{HeaderRow: true}, ""}, // no columns: no header
	}
	for _, tc := range tests {
		if got := string(tc.enc.Header()); got != tc.want {
			t.Errorf("%+v.Header() = %q, want %q", tc.enc, got, tc.want)
		}
	}
	if e := (filesink.CSV{}).Extension(); e != ".csv" {
		t.Errorf("CSV extension = %q", e)
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		name string
		want filesink.Encoder
	}{
		{"jsonl", filesink.JSONLines{}},
		{"json", filesink.JSONLines{}},
		{"csv", filesink.CSV{}},
		{"text", filesink.Text{}},
		{"txt", filesink.Text{}},
		{"", nil},
		{"JSONL", nil},
		{"parquet", nil},
		{"csv ", nil},
	}
	for _, tc := range tests {
		got, err := filesink.ParseFormat(tc.name)
		if tc.want == nil {
			if err == nil {
				t.Errorf("ParseFormat(%q) = %T, want an error", tc.name, got)
			} else if !strings.Contains(err.Error(), "jsonl") {
				t.Errorf("ParseFormat(%q) error %q does not list the formats", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFormat(%q): %v", tc.name, err)
			continue
		}
		if got.Extension() != tc.want.Extension() {
			t.Errorf("ParseFormat(%q) = %T (%s), want %T", tc.name, got, got.Extension(), tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"4096", 4096, false},
		{"0", 0, false},
		{"128MiB", 128 << 20, false},
		{"64KiB", 64 << 10, false},
		{"2GiB", 2 << 30, false},
		{"1GB", 1_000_000_000, false},
		{"5MB", 5_000_000, false},
		{"3KB", 3000, false},
		{"16K", 16 << 10, false},
		{"8M", 8 << 20, false},
		{"1G", 1 << 30, false},
		{"512B", 512, false},
		{"10 MiB", 10 << 20, false},
		{"", 0, true},
		{"MiB", 0, true},
		{"-1", 0, true},
		{"-5MiB", 0, true},
		{"1.5GiB", 0, true},
		{"12XB", 0, true},
		{"12 kib", 0, true},
		{"abc", 0, true},
		{"0x10", 0, true},
		{"1KiBB", 0, true},
		{"9223372036854775807", 9223372036854775807, false},
		{"9223372036854775808", 0, true},
		{"8589934592GiB", 0, true}, // overflows int64
	}
	for _, tc := range tests {
		got, err := filesink.ParseSize(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestNewCompression(t *testing.T) {
	tests := []struct {
		name    string
		ext     string
		none    bool
		wantErr bool
	}{
		{"", "", true, false},
		{"none", "", true, false},
		{"gzip", ".gz", false, false},
		{"zstd", ".zst", false, false},
		{"lz4", "", false, true},
		{"GZIP", "", false, true},
	}
	for _, tc := range tests {
		c, err := filesink.NewCompression(tc.name)
		switch {
		case tc.wantErr:
			if err == nil {
				t.Errorf("NewCompression(%q) = %v, want an error", tc.name, c)
			}
		case err != nil:
			t.Errorf("NewCompression(%q): %v", tc.name, err)
		case tc.none:
			if c != nil {
				t.Errorf("NewCompression(%q) = %T, want nil", tc.name, c)
			}
		case c == nil || c.Extension() != tc.ext:
			t.Errorf("NewCompression(%q) = %v, want extension %q", tc.name, c, tc.ext)
		}
	}
}

// TestCompressionFrames checks that every Frame call is one complete frame
// that decodes alone, and that the concatenation decodes to all inputs.
func TestCompressionFrames(t *testing.T) {
	chunks := [][]byte{
		[]byte(`{"a":1}` + "\n"),
		bytes.Repeat([]byte(`{"payload":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`+"\n"), 3000),
		[]byte(`{"last":true}` + "\n"),
	}
	var want []byte
	for _, c := range chunks {
		want = append(want, c...)
	}
	for _, name := range []string{"gzip", "zstd"} {
		t.Run(name, func(t *testing.T) {
			c, err := filesink.NewCompression(name)
			if err != nil {
				t.Fatal(err)
			}
			var all bytes.Buffer
			for i, chunk := range chunks {
				var one bytes.Buffer
				if err := c.Frame(&one, chunk); err != nil {
					t.Fatal(err)
				}
				got, err := decompress(name, one.Bytes())
				if err != nil || !bytes.Equal(got, chunk) {
					t.Fatalf("frame %d does not decode alone to its input (%d bytes, err %v)", i, len(got), err)
				}
				all.Write(one.Bytes())
			}
			got, err := decompress(name, all.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("concatenated frames decode to %d bytes, want %d", len(got), len(want))
			}
			if n := countFrames(t, name, all.Bytes()); n != len(chunks) {
				t.Errorf("%d frames, want %d", n, len(chunks))
			}
		})
	}
}

// decompress decodes a gzip or zstd stream of any number of members/frames
// with the klauspost readers, and for gzip also with compress/gzip, which
// must agree.
func decompress(kind string, b []byte) ([]byte, error) {
	switch kind {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			return nil, err
		}
		sr, err := stdgzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		std, err := io.ReadAll(sr)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(out, std) {
			return nil, errors.New("compress/gzip and klauspost gzip disagree")
		}
		return out, nil
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		out, err := io.ReadAll(zr)
		if err != nil {
			return nil, err
		}
		// The one-shot decoder must agree.
		d, err := zstd.NewReader(nil)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		all, err := d.DecodeAll(b, nil)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(all, out) {
			return nil, errors.New("zstd stream and DecodeAll disagree")
		}
		return out, nil
	}
	return b, nil
}

// countFrames counts gzip members or zstd frames in b.
func countFrames(t *testing.T, kind string, b []byte) int {
	t.Helper()
	switch kind {
	case "gzip":
		br := bytes.NewReader(b)
		zr, err := stdgzip.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			zr.Multistream(false)
			if _, err := io.Copy(io.Discard, zr); err != nil {
				t.Fatal(err)
			}
			n++
			if err := zr.Reset(br); err == io.EOF {
				return n
			} else if err != nil {
				t.Fatal(err)
			}
		}
	case "zstd":
		n := 0
		for len(b) > 0 {
			var h zstd.Header
			if err := h.Decode(b); err != nil {
				t.Fatalf("zstd frame header %d: %v", n, err)
			}
			size := frameSize(t, b, h)
			b = b[size:]
			n++
		}
		return n
	}
	return 1
}

// frameSize returns the length of the zstd frame at the start of b, by
// walking its block headers (RFC 8878, 3.1.1).
func frameSize(t *testing.T, b []byte, h zstd.Header) int {
	t.Helper()
	off := h.HeaderSize
	for {
		if off+3 > len(b) {
			t.Fatalf("zstd frame truncated in a block header")
		}
		bh := int(b[off]) | int(b[off+1])<<8 | int(b[off+2])<<16
		last, typ, size := bh&1 == 1, (bh>>1)&3, bh>>3
		off += 3
		if typ == 1 { // RLE: one byte
			size = 1
		}
		off += size
		if last {
			break
		}
	}
	if h.HasCheckSum {
		off += 4
	}
	if off > len(b) {
		t.Fatalf("zstd frame longer than the data")
	}
	return off
}

// BenchmarkJSONLinesEncode is the JSON-lines validation on the sink's hot
// path, for a generator record (ASCII) and for a record of the same size
// whose strings are mostly not ASCII.
func BenchmarkJSONLinesEncode(b *testing.B) {
	g, err := source.NewGenerator(source.GenConfig{Count: 1, Seed: 1, Size: 1024}, nil)
	if err != nil {
		b.Fatal(err)
	}
	rec, err := g.Next(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ascii := bytes.Clone(rec.Value)
	other := []byte(`{"id":12345,"key":"k-17","ts":"2026-01-01T00:00:00.123Z","payload":"` +
		strings.Repeat("Grüße aus Köln, 東京と大阪 ", 30) + `"}`)
	for _, tc := range []struct {
		name string
		rec  []byte
	}{{"ascii", ascii}, {"non-ascii", other}} {
		b.Run(tc.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(tc.rec))
			b.SetBytes(int64(len(tc.rec)))
			for b.Loop() {
				if _, err := (filesink.JSONLines{}).Encode(dst, tc.rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
