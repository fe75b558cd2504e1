package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

// testTimeout bounds every blocking call of a test.
const testTimeout = 30 * time.Second

// rec is a record as a test sees it.
type rec struct {
	Origin string
	Value  string
}

func (r rec) String() string { return r.Origin + "=" + r.Value }

func testConfig(c *kafkatest.Cluster, topics ...string) Config {
	return Config{
		Brokers:        c.Addrs(),
		Topics:         topics,
		ConnectTimeout: 5 * time.Second,
		probeInterval:  50 * time.Millisecond,
	}
}

func mustOpen(t testing.TB, cfg Config, pos json.RawMessage) *Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := Open(ctx, cfg, pos)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// readN reads exactly n records.
func readN(t testing.TB, s *Source, n int) []rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out []rec
	for len(out) < n {
		r, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, rec{r.Origin.String(), string(r.Value)})
	}
	return out
}

// readToEOF reads a bounded source to its end and checks that io.EOF is
// sticky.
func readToEOF(t testing.TB, s *Source) []rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out []rec
	for {
		r, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(out), err)
		}
		out = append(out, rec{r.Origin.String(), string(r.Value)})
	}
	if _, err := s.Next(ctx); err != io.EOF {
		t.Fatalf("Next after io.EOF: %v, want io.EOF again", err)
	}
	return out
}

// readUntilBlocked reads until Next blocks for d, and checks that the
// blocked Next returned the context's error, unwrapped.
func readUntilBlocked(t testing.TB, s *Source, d time.Duration) []rec {
	t.Helper()
	var out []rec
	for {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		r, err := s.Next(ctx)
		cancel()
		if err == context.DeadlineExceeded {
			return out
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(out), err)
		}
		out = append(out, rec{r.Origin.String(), string(r.Value)})
	}
}

func position(t testing.TB, s *Source) json.RawMessage {
	t.Helper()
	pos, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(pos) {
		t.Fatalf("Position is not valid JSON: %s", pos)
	}
	return pos
}

// produceN writes n records "P-i" to each partition of topic and returns
// them as the source should return them.
func produceN(t testing.TB, c *kafkatest.Cluster, topic string, partitions int32, n int) []rec {
	t.Helper()
	var want []rec
	for p := range partitions {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprintf("%s-%d-%d", topic, p, i)
		}
		offs := c.MustProduce(t, topic, p, vals...)
		for i, o := range offs {
			want = append(want, rec{fmt.Sprintf("%s/%d:%d", topic, p, o), vals[i]})
		}
	}
	return want
}

// sameRecords checks got against want as sets, and that got holds no
// duplicate and is in offset order within each partition.
func sameRecords(t testing.TB, got, want []rec) {
	t.Helper()
	seen := make(map[rec]bool)
	last := make(map[string]int64)
	for _, r := range got {
		if seen[r] {
			t.Errorf("duplicate record %v", r)
		}
		seen[r] = true
		name, num, _ := strings.Cut(r.Origin, ":")
		var n int64
		fmt.Sscan(num, &n)
		if l, ok := last[name]; ok && n <= l {
			t.Errorf("record %v after offset %d of the same partition", r, l)
		}
		last[name] = n
	}
	w := make(map[rec]bool)
	for _, r := range want {
		w[r] = true
		if !seen[r] {
			t.Errorf("missing record %v", r)
		}
	}
	for _, r := range got {
		if !w[r] {
			t.Errorf("unexpected record %v", r)
		}
	}
	if t.Failed() {
		t.Logf("got %d records %v\nwant %d records %v", len(got), got, len(want), want)
	}
}

func values(rs []rec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Value
	}
	return out
}
