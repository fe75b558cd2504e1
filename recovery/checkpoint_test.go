package recovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func sample() *Checkpoint {
	return &Checkpoint{
		ID: 42, Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Source: json.RawMessage(`{"next":1000}`),
		Participants: []Participant{
			{Name: "filesink/0", State: json.RawMessage(`{"parts":[]}`),
				Pending: []Committable{{Checkpoint: 41, Data: json.RawMessage(`{"a":1}`)}, {Checkpoint: 42, Data: json.RawMessage(`{"b":2}`)}}},
			{Name: "filesink/1"},
		},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	b, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("x", b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(sample())
	have, _ := json.Marshal(got)
	if !bytes.Equal(want, have) {
		t.Fatalf("round trip changed the record:\n got %s\nwant %s", have, want)
	}
}

func TestDecodeRejectsEveryDefect(t *testing.T) {
	good, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 0x40; return b }
	cases := map[string][]byte{
		"empty":            nil,
		"short header":     good[:10],
		"truncated":        good[:len(good)-1],
		"padded":           append(bytes.Clone(good), ' '),
		"bad magic":        flip(0),
		"flags":            flip(11),
		"length":           flip(15),
		"checksum":         flip(19),
		"payload bit flip": flip(headerLen + 5),
	}
	for name, b := range cases {
		_, err := Decode("/state/ckpt-1", b)
		if !errors.Is(err, ErrCorruptCheckpoint) {
			t.Errorf("%s: got %v, want ErrCorruptCheckpoint", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "/state/ckpt-1") {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
	// A valid checksum over an unparsable payload is still corrupt.
	bad := &Checkpoint{ID: 1}
	b, _ := Encode(bad)
	b = append(b[:headerLen], []byte(`{"id":1,"unknown":true}`)...)
	fixHeader(b)
	if _, err := Decode("f", b); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("unknown field: got %v", err)
	}
	v := bytes.Clone(good)
	v[9] = 9 // version 9
	if _, err := Decode("f", v); !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("future version: got %v, want ErrUnsupportedVersion only", err)
	}
}

// fixHeader recomputes length and checksum after a test edited the payload.
func fixHeader(b []byte) {
	p := b[headerLen:]
	putU32(b[12:], uint32(len(p)))
	putU32(b[16:], crc(p))
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(sample())
	f.Add(good)
	f.Add(good[:headerLen])
	f.Add([]byte("FSINKCKP"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode("fuzz", b)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("error %v matches neither sentinel", err)
			}
			return
		}
		// Whatever decodes must re-encode to a record that decodes the same.
		again, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Decode("again", again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		x, _ := json.Marshal(c)
		y, _ := json.Marshal(c2)
		if !bytes.Equal(x, y) {
			t.Fatalf("decode/encode not stable:\n%s\n%s", x, y)
		}
	})
}
