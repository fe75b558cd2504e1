package async_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/source"
)

var _ pipeline.Sink = (*async.Sink)(nil)

// ledger is a receiver: it records every delivery of every record (by the
// "id" of a generated record, or the decimal number a test wrote), and
// counts records a second time taking only the first delivery of each key,
// as a receiver that deduplicates on the idempotency key would. A key that
// comes back with other records is an error: deduplicating on it would
// lose data.
type ledger struct {
	mu    sync.Mutex
	keys  map[string][32]byte
	all   map[int64]int // id -> deliveries
	byKey map[int64]int // id -> deliveries in first-seen keys
	bad   []string
}

func newLedger() *ledger {
	return &ledger{keys: map[string][32]byte{}, all: map[int64]int{}, byKey: map[int64]int{}}
}

func recordID(rec []byte) (int64, error) {
	if n, err := strconv.ParseInt(string(rec), 10, 64); err == nil {
		return n, nil
	}
	var r struct {
		ID *int64 `json:"id"`
	}
	if err := json.Unmarshal(rec, &r); err != nil || r.ID == nil {
		return 0, fmt.Errorf("record %.80q has no id (%v)", rec, err)
	}
	return *r.ID, nil
}

func (l *ledger) take(b *async.Batch) {
	h := sha256.New()
	ids := make([]int64, len(b.Records))
	for i, r := range b.Records {
		id, err := recordID(r)
		if err != nil {
			l.mu.Lock()
			l.bad = append(l.bad, err.Error())
			l.mu.Unlock()
			return
		}
		ids[i] = id
		fmt.Fprintf(h, "%d\n%s", len(r), r)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, seen := l.keys[b.Key]
	if seen && prev != sum {
		l.bad = append(l.bad, fmt.Sprintf("key %s came back with other records (seq %d, first %d, %d records)", b.Key, b.Seq, b.First, len(b.Records)))
	}
	if !seen {
		l.keys[b.Key] = sum
	}
	for _, id := range ids {
		l.all[id]++
		if !seen {
			l.byKey[id]++
		}
	}
}

// check reports records never delivered, and, with exact set, records
// delivered more than once counting by key.
func (l *ledger) check(t *testing.T, count int64, exact bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.bad {
		t.Error(b)
	}
	var missing, dups []string
	for id := range count {
		if l.all[id] == 0 {
			missing = append(missing, strconv.FormatInt(id, 10))
		}
		if exact && l.byKey[id] != 1 {
			dups = append(dups, fmt.Sprintf("%d x%d", id, l.byKey[id]))
		}
	}
	if len(l.all) > int(count) {
		t.Errorf("%d distinct ids delivered, want %d", len(l.all), count)
	}
	if len(missing) > 0 {
		t.Errorf("%d records never delivered, e.g. %s", len(missing), strings.Join(missing[:min(10, len(missing))], ", "))
	}
	if len(dups) > 0 {
		t.Errorf("%d records not exactly once counting by key, e.g. %s", len(dups), strings.Join(dups[:min(10, len(dups))], ", "))
	}
}

func (l *ledger) deliveries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.all {
		n += c
	}
	return n
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newSink(t *testing.T, sender async.Sender, opts ...async.Option) *async.Sink {
	t.Helper()
	s, err := async.New(sender, 0, append([]async.Option{async.WithLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func write(t *testing.T, s *async.Sink, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Write(context.Background(), []byte(strconv.FormatInt(i, 10)), source.Origin{Name: "t", Num: i}); err != nil {
			t.Fatalf("Write(%d): %v", i, err)
		}
	}
}

func originOf(i int64) source.Origin { return source.Origin{Name: "t", Num: i} }
