package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// groupSource is a generator that records its CommitToGroup calls (from
// the pipeline's own goroutine: the race detector checks the hand-over).
type groupSource struct {
	source.Source
	mu    *sync.Mutex
	calls *[]string
	fail  bool
}

func (s *groupSource) CommitToGroup(_ context.Context, pos json.RawMessage) error {
	s.mu.Lock()
	*s.calls = append(*s.calls, string(pos))
	s.mu.Unlock()
	if s.fail {
		return errors.New("group coordinator not available")
	}
	return nil
}

var _ source.GroupCommitter = (*groupSource)(nil)

// TestRunGroupCommit: a source that is a source.GroupCommitter gets the
// positions of committed checkpoints, in order, the last one being the
// final checkpoint's; a failing call is a warning, never a failed job; a
// restart hands over the restored checkpoint's position first.
func TestRunGroupCommit(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "ok", true: "failing"}[fail], func(t *testing.T) {
			e, _ := memEnv(t)
			const count = 1000
			var mu sync.Mutex
			var calls []string
			open := func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
				src, err := gen(count)(ctx, pos)
				if err != nil {
					return nil, err
				}
				return &groupSource{Source: src, mu: &mu, calls: &calls, fail: fail}, nil
			}
			var logs syncBuf
			cfg := e.config(e.sinks(t, 2), open)
			cfg.CheckpointEvery = 100
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			res, err := pipeline.Run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			recs, err := recovery.Retained(context.Background(), e.store)
			if err != nil {
				t.Fatal(err)
			}
			decided := map[string]bool{}
			var final string
			for _, r := range recs {
				decided[string(r.Source)] = true
				if r.ID == res.Checkpoint {
					final = string(r.Source)
				}
			}
			mu.Lock()
			got := append([]string(nil), calls...)
			mu.Unlock()
			if len(got) == 0 {
				t.Fatal("CommitToGroup never called")
			}
			if got[len(got)-1] != final {
				t.Errorf("last CommitToGroup position %s, want the final checkpoint's %s", got[len(got)-1], final)
			}
			prev := int64(-1)
			for _, p := range got {
				var v struct{ Next int64 }
				if err := json.Unmarshal([]byte(p), &v); err != nil {
					t.Fatalf("position %s: %v", p, err)
				}
				if v.Next < prev {
					t.Errorf("positions out of order: %d after %d", v.Next, prev)
				}
				prev = v.Next
				if len(recs) > 0 && v.Next >= recsOldestNext(t, recs) && !decided[p] {
					t.Errorf("CommitToGroup got %s, the position of no retained checkpoint record", p)
				}
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "group coordinator not available")
			if warned != fail {
				t.Errorf("warning logged: %v, want %v; log:\n%s", warned, fail, logs.String())
			}

			// Run again: the restored checkpoint's position comes first.
			mu.Lock()
			calls = nil
			mu.Unlock()
			if _, err := pipeline.Run(context.Background(), cfg); err != nil {
				t.Fatalf("second Run: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(calls) == 0 || calls[0] != final {
				t.Errorf("second run: CommitToGroup calls %v, want the restored position %s first", calls, final)
			}
		})
	}
}

func recsOldestNext(t *testing.T, recs []*recovery.Checkpoint) int64 {
	t.Helper()
	var v struct{ Next int64 }
	if err := json.Unmarshal(recs[0].Source, &v); err != nil {
		t.Fatal(err)
	}
	return v.Next
}

// syncBuf is a bytes.Buffer safe for concurrent writers and a reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openedSource blocks without records; its position at open is what it
// resolved, not what it was given.
type openedSource struct{ blockingSource }

func (s *openedSource) Position() (json.RawMessage, error) {
	return json.RawMessage(`{"resolved":"at open"}`), nil
}

// A checkpoint taken before the first record records the position the
// source was opened at (a Kafka source resolves its start and end offsets
// there), not a nil one that would make a restart resolve them again.
func TestRunCheckpointBeforeFirstRecordKeepsOpenPosition(t *testing.T) {
	e, _ := memEnv(t)
	open := func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
		g, err := source.NewGenerator(source.GenConfig{Count: 10, Seed: 7}, nil)
		if err != nil {
			return nil, err
		}
		return &openedSource{blockingSource{Generator: g, limit: 0}}, nil
	}
	cfg := e.config(e.sinks(t, 1), open)
	cfg.CheckpointInterval = 5 * time.Millisecond
	stop := make(chan struct{})
	cfg.Stop = stop
	time.AfterFunc(100*time.Millisecond, func() { close(stop) })
	res, err := pipeline.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := recovery.Retained(context.Background(), e.store)
	if err != nil || len(recs) == 0 {
		t.Fatalf("retained records: %d, %v (result %+v)", len(recs), err, res)
	}
	for _, r := range recs {
		if string(r.Source) != `{"resolved":"at open"}` {
			t.Errorf("checkpoint %d: source position %s, want the position at open", r.ID, r.Source)
		}
	}
}
