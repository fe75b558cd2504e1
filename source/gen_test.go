package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/source"
)

func newGen(t testing.TB, cfg source.GenConfig, pos json.RawMessage) *source.Generator {
	t.Helper()
	g, err := source.NewGenerator(cfg, pos)
	if err != nil {
		t.Fatalf("NewGenerator(%+v, %s): %v", cfg, pos, err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestGenGolden pins the output: a change would break replay of runs
// checkpointed by an older version.
func TestGenGolden(t *testing.T) {
	for _, tc := range []struct {
		cfg  source.GenConfig
		want []string
	}{
		{source.GenConfig{Count: 3, Seed: 1}, []string{
			`{"id":0,"key":"k-0","ts":"2026-01-01T00:00:00.000Z","payload":"rzyxptnooziabvcjbkwgujvljwrwnlsloka"}`,
			`{"id":1,"key":"k-1","ts":"2026-01-01T00:00:00.001Z","payload":"playdqwchrusmvyuqywicbzwqnzvvkycdrw"}`,
			`{"id":2,"key":"k-2","ts":"2026-01-01T00:00:00.002Z","payload":"habhlrmmrocypycxukeujfxscuffqgdkdbx"}`,
		}},
		{source.GenConfig{Count: 2, Seed: 7, Size: 10, Keys: 3, Step: 1500 * time.Millisecond}, []string{
			`{"id":0,"key":"k-0","ts":"2026-01-01T00:00:00.000Z","payload":""}`,
			`{"id":1,"key":"k-1","ts":"2026-01-01T00:00:01.500Z","payload":""}`,
		}},
		{source.GenConfig{Count: 2, Size: 1, Step: -time.Second}, []string{
			`{"id":0,"key":"k-0","ts":"2026-01-01T00:00:00Z","payload":""}`,
			`{"id":1,"key":"k-1","ts":"2025-12-31T23:59:59Z","payload":""}`,
		}},
	} {
		g := newGen(t, tc.cfg, nil)
		var got []string
		for _, r := range readAll(t, g) {
			got = append(got, r.Value)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%+v:\n got %q\nwant %q", tc.cfg, got, tc.want)
		}
	}
}

type genRecord struct {
	ID      int64  `json:"id"`
	Key     string `json:"key"`
	TS      string `json:"ts"`
	Payload string `json:"payload"`
}

func TestGenRecords(t *testing.T) {
	for _, cfg := range []source.GenConfig{
		{Count: 1000, Seed: 1},
		{Count: 1000, Seed: 2, Size: 1024, Keys: 7},
		{Count: 300, Seed: 3, Size: 40, Keys: 1},
		{Count: 2000, Seed: 4, Size: 200, Step: 997 * time.Minute}, // crosses days and years
		{Count: 2000, Seed: 5, Step: -37 * time.Minute, Start: time.Date(1969, 12, 31, 23, 0, 0, 0, time.FixedZone("x", 3600))},
		{Count: 100, Step: time.Microsecond},
		{Count: 100, Step: 3 * time.Nanosecond, Start: time.Date(2026, 5, 1, 0, 0, 0, 1, time.UTC)},
		{Count: 100, Step: time.Hour},
	} {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			g := newGen(t, cfg, nil)
			full := g.Config()
			layout := "2006-01-02T15:04:05.000000000Z"
			switch {
			case full.Step%time.Second == 0 && full.Start.Nanosecond() == 0:
				layout = "2006-01-02T15:04:05Z"
			case full.Step%time.Millisecond == 0 && full.Start.Nanosecond()%1e6 == 0:
				layout = "2006-01-02T15:04:05.000Z"
			case full.Step%time.Microsecond == 0 && full.Start.Nanosecond()%1e3 == 0:
				layout = "2006-01-02T15:04:05.000000Z"
			}
			recs := readAll(t, g)
			if int64(len(recs)) != cfg.Count {
				t.Fatalf("%d records, want %d", len(recs), cfg.Count)
			}
			for i, r := range recs {
				var v genRecord
				dec := json.NewDecoder(strings.NewReader(r.Value))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&v); err != nil {
					t.Fatalf("record %d %q: %v", i, r.Value, err)
				}
				if v.ID != int64(i) || r.Origin != fmt.Sprintf("gen:%d", i) {
					t.Fatalf("record %d: id %d origin %s", i, v.ID, r.Origin)
				}
				if want := fmt.Sprintf("k-%d", i%full.Keys); v.Key != want {
					t.Fatalf("record %d: key %q, want %q", i, v.Key, want)
				}
				if want := full.Start.Add(time.Duration(i) * full.Step).UTC().Format(layout); v.TS != want {
					t.Fatalf("record %d: ts %q, want %q", i, v.TS, want)
				}
				ts, err := time.Parse(time.RFC3339Nano, v.TS)
				if err != nil || !ts.Equal(full.Start.Add(time.Duration(i)*full.Step)) {
					t.Fatalf("record %d: ts %q does not parse as RFC 3339 to the event time: %v", i, v.TS, err)
				}
				if strings.Trim(v.Payload, "abcdefghijklmnopqrstuvwxyz") != "" {
					t.Fatalf("record %d: payload %q is not lowercase letters", i, v.Payload)
				}
				if len(v.Payload) > 0 && len(r.Value) != full.Size {
					t.Fatalf("record %d: %d bytes, want %d", i, len(r.Value), full.Size)
				}
				if len(v.Payload) == 0 && len(r.Value) < full.Size {
					t.Fatalf("record %d: %d bytes with an empty payload, want at least %d", i, len(r.Value), full.Size)
				}
			}
		})
	}
}

func TestGenDeterminism(t *testing.T) {
	cfg := source.GenConfig{Count: 500, Seed: 42, Size: 300}
	a := readAll(t, newGen(t, cfg, nil))
	b := readAll(t, newGen(t, cfg, nil))
	equalRecs(t, "same seed", a, b)
	cfg.Seed = 43
	c := readAll(t, newGen(t, cfg, nil))
	same := 0
	for i := range a {
		if a[i].Value == c[i].Value {
			same++
		}
	}
	if same > 0 {
		t.Errorf("seeds 42 and 43 give %d equal records", same)
	}
	// Payloads vary between records.
	seen := map[string]bool{}
	for _, r := range a {
		var v genRecord
		json.Unmarshal([]byte(r.Value), &v)
		seen[v.Payload] = true
	}
	if len(seen) < len(a)*99/100 {
		t.Errorf("only %d distinct payloads in %d records", len(seen), len(a))
	}
}

func TestGenResume(t *testing.T) {
	cfg := source.GenConfig{Count: 40, Seed: 9, Size: 64}
	want := readAll(t, newGen(t, cfg, nil))
	for k := 0; k <= len(want); k++ {
		g := newGen(t, cfg, nil)
		head, _ := readN(t, g, k)
		pos, err := g.Position()
		if err != nil || string(pos) != fmt.Sprintf(`{"next":%d}`, k) {
			t.Fatalf("Position() = %s, %v", pos, err)
		}
		g.Close()
		if _, err := g.Next(context.Background()); !errors.Is(err, source.ErrClosed) {
			t.Fatalf("Next after Close: %v", err)
		}
		if p2, _ := g.Position(); string(p2) != string(pos) {
			t.Fatalf("Position after Close = %s, want %s", p2, pos)
		}
		r := newGen(t, cfg, pos)
		equalRecs(t, "resume at "+string(pos), append(head, readAll(t, r)...), want)
		if _, err := r.Next(context.Background()); err != io.EOF {
			t.Fatalf("Next at the end: %v", err)
		}
	}
}

func TestGenBadPosition(t *testing.T) {
	cfg := source.GenConfig{Count: 10}
	for _, p := range []string{`{`, `{}`, `{"next":-1}`, `{"next":"1"}`, `{"next":1,"x":2}`, `{"file":"a","offset":0,"line":0}`, `{"next":1.5}`} {
		if _, err := source.NewGenerator(cfg, json.RawMessage(p)); !errors.Is(err, source.ErrBadPosition) {
			t.Errorf("position %s: %v, want ErrBadPosition", p, err)
		}
	}
	_, err := source.NewGenerator(cfg, json.RawMessage(`{"next":11}`))
	var ice *source.InputChangedError
	if !errors.As(err, &ice) || !errors.Is(err, source.ErrInputChanged) || ice.Input != "gen" || !strings.Contains(err.Error(), "count is 10") {
		t.Errorf("next beyond count: %v", err)
	}
}

func TestGenConfigErrors(t *testing.T) {
	for _, cfg := range []source.GenConfig{
		{Count: -1},
		{Count: 1, Size: -1},
		{Count: 1, Size: source.MaxGenSize + 1},
		{Count: 1, Keys: -1},
		{Count: 1, Start: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Count: 1 << 40, Step: time.Hour},
		{Count: 3, Step: -1 << 63},
		{Count: 1 << 20, Step: 24 * time.Hour * 365}, // past year 9999
		{Count: 1 << 20, Step: -24 * time.Hour * 365},
	} {
		if _, err := source.NewGenerator(cfg, nil); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	g := newGen(t, source.GenConfig{}, nil)
	if recs := readAll(t, g); len(recs) != 0 {
		t.Errorf("count 0 gave %d records", len(recs))
	}
}

func TestParseGenQuery(t *testing.T) {
	start := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		q       string
		want    source.GenConfig
		wantErr string
	}{
		{q: "count=5", want: source.GenConfig{Count: 5}},
		{q: "count=0", want: source.GenConfig{Count: 0}},
		{q: "count=5&seed=18446744073709551615&size=1024&keys=3&start=2025-03-04T05:06:07Z&step=2s",
			want: source.GenConfig{Count: 5, Seed: 1<<64 - 1, Size: 1024, Keys: 3, Start: start, Step: 2 * time.Second}},
		{q: "", wantErr: "count is required"},
		{q: "seed=1", wantErr: "count is required"},
		{q: "count=-1", wantErr: "count"},
		{q: "count=x", wantErr: "count"},
		{q: "count=1&count=2", wantErr: "given 2 times"},
		{q: "count=1&sise=5", wantErr: `unknown parameter "sise"`},
		{q: "count=1&size=0", wantErr: "size"},
		{q: "count=1&keys=0", wantErr: "keys"},
		{q: "count=1&seed=-1", wantErr: "seed"},
		{q: "count=1&start=yesterday", wantErr: "start"},
		{q: "count=1&step=fast", wantErr: "step"},
		{q: "count=1&step=0s", wantErr: "step"},
		{q: "count=1;x", wantErr: "gen query"},
	} {
		got, err := source.ParseGenQuery(tc.q)
		if tc.wantErr != "" {
			if !errors.Is(err, source.ErrBadURI) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseGenQuery(%q) error %v, want one containing %q", tc.q, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.Count != tc.want.Count || got.Seed != tc.want.Seed || got.Size != tc.want.Size ||
			got.Keys != tc.want.Keys || !got.Start.Equal(tc.want.Start) || got.Step != tc.want.Step {
			t.Errorf("ParseGenQuery(%q) = %+v, %v; want %+v", tc.q, got, err, tc.want)
		}
	}
}

func TestGenNoAllocs(t *testing.T) {
	g := newGen(t, source.GenConfig{Count: 1 << 28, Size: 1024, Step: 7 * time.Second}, nil)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100000, func() {
		if _, err := g.Next(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Next allocates %v times per record", allocs)
	}
}
