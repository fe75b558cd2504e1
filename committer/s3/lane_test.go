package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/recovery"
)

const laneState = "out/_filesink"

// laneEnv is a bucket on the shared MinIO with a faultproxy in front of it:
// direct is the job's store talking to MinIO, faulty the same store through
// the proxy.
type laneEnv struct {
	t      *testing.T
	client *s3api.Client
	bucket string
	proxy  *faultproxy.Proxy
	direct *Store
	faulty *Store
}

func newLaneEnv(t *testing.T) *laneEnv {
	srv := requireMinio(t)
	retryer := func(o *s3api.Options) { o.Retryer = retry.AddWithMaxBackoffDelay(NewRetryer(), 20*time.Millisecond) }
	e := &laneEnv{t: t, client: srv.Client(t, retryer), bucket: srv.NewBucket(t), proxy: faultproxy.New(t, srv.Endpoint())}
	e.direct = MustNewStore(t, e.client, e.bucket, laneState)
	e.faulty = MustNewStore(t, srv.ClientAt(t, e.proxy.URL(), retryer), e.bucket, laneState)
	return e
}

// raw reads the bytes and the ETag of the HEAD of lane t/partition.
func (e *laneEnv) raw(partition int32) ([]byte, string) {
	e.t.Helper()
	key := e.direct.laneKey("t", partition)
	out, err := e.client.GetObject(e.t.Context(), &s3api.GetObjectInput{Bucket: &e.bucket, Key: &key})
	if err != nil {
		e.t.Fatalf("read %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return b, aws.ToString(out.ETag)
}

// head reads the HEAD of lane t/partition, failing the test if it is absent.
func (e *laneEnv) head(partition int32) *LaneHead {
	e.t.Helper()
	h, _, err := ReadLane(e.t.Context(), e.direct, "t", partition)
	if err != nil || h == nil {
		e.t.Fatalf("ReadLane(t/%d) = %+v, %v", partition, h, err)
	}
	return h
}

// isHeadPut matches the PutObject of a lane HEAD.
func isHeadPut(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+LaneHeadFile)
}

func owner(member string, generation int32) LaneOwner {
	return LaneOwner{Member: member, Generation: generation, Host: "host-" + member, PID: 100, RunID: "run-" + member}
}

func firstCheckpoint() *recovery.Checkpoint {
	return &recovery.Checkpoint{ID: 0, Source: json.RawMessage(`{"v":1,"next":7}`)}
}

func mustAcquireLane(t *testing.T, l *LaneStore, o LaneOwner) *LaneHead {
	t.Helper()
	h, err := l.Acquire(t.Context(), o, firstCheckpoint)
	if err != nil {
		t.Fatalf("Acquire of %s by %s: %v", l.Key(), o.Member, err)
	}
	return h
}

func mustPut(t *testing.T, l *LaneStore, c *recovery.Checkpoint) {
	t.Helper()
	if err := l.Put(t.Context(), c); err != nil {
		t.Fatalf("Put(%d) on %s: %v", c.ID, l.Key(), err)
	}
}

// TestLaneCreate: the first Acquire creates the HEAD at epoch 1 with the
// first checkpoint; Put, List, Get, Release and the job's id work on it.
func TestLaneCreate(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	if h, etag, err := ReadLane(ctx, e.direct, "t", 3); h != nil || etag != "" || err != nil {
		t.Fatalf("ReadLane of an absent lane = %+v, %q, %v", h, etag, err)
	}
	l := NewLaneStore(e.direct, "t", 3)
	if got, want := l.Key(), laneState+"/lanes/t/3/HEAD"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	if got, want := l.Location(), "s3://"+e.bucket+"/"+laneState+"/lanes/t/3"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	if err := l.Put(ctx, sampleCheckpoint(1)); err == nil || errors.Is(err, ErrFenced) {
		t.Errorf("Put before Acquire = %v; want an error that is not ErrFenced", err)
	}
	h := mustAcquireLane(t, l, owner("a", 1))
	if h.V != 1 || h.Topic != "t" || h.Partition != 3 || h.Epoch != 1 || h.Seq != 1 || h.Owner != owner("a", 1) ||
		h.Released || h.Done || h.Checkpoint == nil || h.Checkpoint.ID != 0 || string(h.Checkpoint.Source) != `{"v":1,"next":7}` {
		t.Fatalf("head after the first Acquire = %+v", h)
	}
	if _, err := l.Acquire(ctx, owner("a", 1), firstCheckpoint); err == nil {
		t.Error("a second Acquire of the same store succeeded")
	}
	read, etag, err := ReadLane(ctx, e.direct, "t", 3)
	if _, rawTag := e.raw(3); err != nil || read.Epoch != 1 || read.Seq != 1 || etag != rawTag {
		t.Fatalf("ReadLane = %+v, %q, %v; want epoch 1 with ETag %q", read, etag, err, rawTag)
	}
	if ids, err := l.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("List with only the first checkpoint = %v, %v; want none", ids, err)
	}
	mustPut(t, l, sampleCheckpoint(1))
	if ids, err := l.List(ctx); err != nil || !slices.Equal(ids, []uint64{1}) {
		t.Errorf("List = %v, %v; want [1]", ids, err)
	}
	if c, err := l.Get(ctx, 1); err != nil || c.ID != 1 || string(c.Source) != `{"offset":42}` || len(c.Participants) != 1 {
		t.Errorf("Get(1) = %+v, %v", c, err)
	}
	if _, err := l.Get(ctx, 2); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get(2) = %v; want fs.ErrNotExist", err)
	}
	if h := e.head(3); h.Epoch != 1 || h.Seq != 2 || h.Checkpoint.ID != 1 || string(h.Checkpoint.Source) != `{"offset":42}` {
		t.Errorf("HEAD after Put(1) = %+v", h)
	}
	// The same record again writes nothing; another record 1 is refused.
	mustPut(t, l, sampleCheckpoint(1))
	other := sampleCheckpoint(1)
	other.Source = json.RawMessage(`{"offset":43}`)
	if err := l.Put(ctx, other); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Put of another record 1 = %v; want fs.ErrExist", err)
	}
	if h := e.head(3); h.Seq != 2 {
		t.Errorf("HEAD seq %d after the repeated Puts; want 2 (nothing written)", h.Seq)
	}
	// The job's id and records are the job store's.
	if err := l.SetJobID(ctx, "fs-lane"); err != nil {
		t.Fatal(err)
	}
	if id, err := e.direct.JobID(ctx); id != "fs-lane" || err != nil || l.JobIDLocation() != e.direct.JobIDLocation() {
		t.Errorf("job id through the lane = %q, %v at %s", id, err, l.JobIDLocation())
	}
	if err := l.Release(ctx, true); err != nil {
		t.Fatal(err)
	}
	if h := e.head(3); !h.Released || !h.Done || h.Seq != 3 || h.Checkpoint.ID != 1 {
		t.Errorf("HEAD after Release = %+v", h)
	}
	if err := l.Release(ctx, false); err != nil {
		t.Errorf("a second Release: %v", err)
	}
	if err := l.Put(ctx, sampleCheckpoint(2)); err == nil || errors.Is(err, ErrFenced) {
		t.Errorf("Put after Release = %v; want an error that is not ErrFenced", err)
	}
	if h := e.head(3); h.Seq != 3 || !h.Done {
		t.Errorf("HEAD after the second Release and a refused Put = %+v; want seq 3, done", h)
	}
	if _, err := NewLaneStore(e.direct, "a/b", 0).Acquire(ctx, owner("a", 1), nil); err == nil {
		t.Error("Acquire of a lane whose topic has a '/' succeeded")
	}
}

// TestLaneTakeover: a takeover bumps epoch and seq and keeps the checkpoint;
// the older owner is fenced on its next write (the stale ETag) and on every
// call after it, and writes nothing.
func TestLaneTakeover(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	a := NewLaneStore(e.direct, "t", 3)
	mustAcquireLane(t, a, owner("a", 1))
	mustPut(t, a, sampleCheckpoint(1))
	b := NewLaneStore(e.direct, "t", 3)
	var points []string
	b.SetHook(func(p string) error { points = append(points, p); return nil })
	h := mustAcquireLane(t, b, owner("b", 2))
	if h.Epoch != 2 || h.Seq != 3 || h.Owner != owner("b", 2) || h.Released || h.Checkpoint == nil || h.Checkpoint.ID != 1 {
		t.Fatalf("head after the takeover = %+v", h)
	}
	if b.Epoch() != 2 || a.Epoch() != 1 {
		t.Errorf("epochs: a %d, b %d; want 1, 2", a.Epoch(), b.Epoch())
	}
	taken, takenTag := e.raw(3)
	err := a.Put(ctx, sampleCheckpoint(2))
	msg := fmt.Sprint(err)
	if !errors.Is(err, ErrFenced) || !strings.Contains(msg, "s3://"+e.bucket+"/"+a.Key()) ||
		!strings.Contains(msg, "owner epoch 1 fenced") || !strings.Contains(msg, "owner epoch 2") || strings.Contains(msg, "\n") {
		t.Fatalf("Put of the old owner = %v; want ErrFenced on one line naming the lane, epoch 1 and epoch 2", err)
	}
	if _, err := a.List(ctx); !errors.Is(err, ErrFenced) {
		t.Errorf("List of the fenced owner = %v", err)
	}
	if _, err := a.Get(ctx, 1); !errors.Is(err, ErrFenced) {
		t.Errorf("Get of the fenced owner = %v", err)
	}
	for name, call := range map[string]func() error{
		"Put":      func() error { return a.Put(ctx, sampleCheckpoint(3)) },
		"Delete":   func() error { return a.Delete(ctx, 1) },
		"Release":  func() error { return a.Release(ctx, false) },
		"SetJobID": func() error { return a.SetJobID(ctx, "fs-x") },
		"Acquire":  func() error { _, err := a.Acquire(ctx, owner("a", 3), nil); return err },
	} {
		if err := call(); !errors.Is(err, ErrFenced) {
			t.Errorf("%s of the fenced owner = %v; want ErrFenced", name, err)
		}
	}
	if body, tag := e.raw(3); !bytes.Equal(body, taken) || tag != takenTag {
		t.Fatal("the fenced owner changed the HEAD")
	}
	mustPut(t, b, sampleCheckpoint(2))
	if want := []string{HookTakeoverRead, HookTakeoverCAS, HookDecided}; !slices.Equal(points, want) {
		t.Errorf("hook points = %q, want %q", points, want)
	}
	// An error from the hook after the decision is returned; the record is
	// decided all the same (a crash after the write).
	crash := errors.New("crash")
	b.SetHook(func(p string) error {
		if p == HookDecided {
			return crash
		}
		return nil
	})
	if err := b.Put(ctx, sampleCheckpoint(3)); !errors.Is(err, crash) {
		t.Errorf("Put with a crashing hook = %v", err)
	}
	if h := e.head(3); h.Checkpoint.ID != 3 || h.Epoch != 2 {
		t.Errorf("HEAD after the crash at %s = %+v; want checkpoint 3 decided", HookDecided, h)
	}
}

// TestLaneStaleGeneration: an owner of an older group generation does not
// take the lane from one of a newer generation; the HEAD stays as it was.
func TestLaneStaleGeneration(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	a := NewLaneStore(e.direct, "t", 0)
	mustAcquireLane(t, a, owner("a", 5))
	before, beforeTag := e.raw(0)
	old := NewLaneStore(e.direct, "t", 0)
	_, err := old.Acquire(ctx, owner("old", 4), firstCheckpoint)
	if !errors.Is(err, ErrStaleGeneration) || !strings.Contains(err.Error(), old.Key()) ||
		!strings.Contains(err.Error(), "generation 4") || !strings.Contains(err.Error(), "generation 5") {
		t.Fatalf("Acquire with generation 4 over 5 = %v; want ErrStaleGeneration naming the lane and both", err)
	}
	if body, tag := e.raw(0); !bytes.Equal(body, before) || tag != beforeTag {
		t.Fatal("the refused Acquire changed the HEAD")
	}
	mustPut(t, a, sampleCheckpoint(1))
	same := NewLaneStore(e.direct, "t", 0)
	if h := mustAcquireLane(t, same, owner("same", 5)); h.Epoch != 2 {
		t.Errorf("takeover in the same generation: epoch %d, want 2", h.Epoch)
	}
}

// TestLaneCreateRace: two owners acquire an absent lane at once: one
// creates it, the other takes it over from the first; the first is fenced.
func TestLaneCreateRace(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	for p := range int32(4) {
		stores := []*LaneStore{NewLaneStore(e.direct, "t", p), NewLaneStore(e.direct, "t", p)}
		heads := make([]*LaneHead, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, l := range stores {
			wg.Go(func() {
				<-start
				heads[i], errs[i] = l.Acquire(ctx, owner(string(rune('a'+i)), 1), firstCheckpoint)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("lane t/%d: concurrent Acquire: %v", p, err)
		}
		epochs := []uint64{heads[0].Epoch, heads[1].Epoch}
		slices.Sort(epochs)
		if !slices.Equal(epochs, []uint64{1, 2}) {
			t.Fatalf("lane t/%d: epochs %v, want 1 and 2", p, epochs)
		}
		first, second := stores[0], stores[1]
		if heads[0].Epoch == 2 {
			first, second = second, first
		}
		if err := first.Put(ctx, sampleCheckpoint(1)); !errors.Is(err, ErrFenced) {
			t.Errorf("lane t/%d: Put of the epoch 1 owner = %v; want ErrFenced", p, err)
		}
		mustPut(t, second, sampleCheckpoint(1))
		if h := e.head(p); h.Epoch != 2 || h.Seq != 3 || h.Checkpoint.ID != 1 {
			t.Errorf("lane t/%d: HEAD = %+v", p, h)
		}
	}
}

// TestLaneNoABA: every version of a HEAD has other bytes and another ETag,
// also versions with the same checkpoint and owner, so an If-Match on an
// old version never matches a later one.
func TestLaneNoABA(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	var bodies [][]byte
	var tags []string
	record := func() {
		b, tag := e.raw(1)
		bodies = append(bodies, b)
		tags = append(tags, tag)
	}
	a := NewLaneStore(e.direct, "t", 1)
	mustAcquireLane(t, a, owner("a", 1))
	record()
	mustPut(t, a, sampleCheckpoint(1))
	record()
	if err := a.Release(ctx, false); err != nil {
		t.Fatal(err)
	}
	record()
	b := NewLaneStore(e.direct, "t", 1)
	mustAcquireLane(t, b, owner("b", 1))
	record()
	if err := b.Release(ctx, false); err != nil {
		t.Fatal(err)
	}
	record()
	again := NewLaneStore(e.direct, "t", 1) // a's owner again: same member, generation, host, pid, run
	mustAcquireLane(t, again, owner("a", 1))
	record()
	for i := range bodies {
		for j := range i {
			if bytes.Equal(bodies[i], bodies[j]) || tags[i] == tags[j] {
				t.Errorf("versions %d and %d share bytes or ETag %s", j+1, i+1, tags[i])
			}
		}
	}
	if h := e.head(1); h.Seq != uint64(len(bodies)) || h.Epoch != 3 || h.Checkpoint.ID != 1 {
		t.Errorf("HEAD = %+v; want seq %d, epoch 3, checkpoint 1", h, len(bodies))
	}
	// The version of b's takeover had the same checkpoint: its ETag no
	// longer matches.
	key := a.Key()
	_, err := e.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &e.bucket, Key: &key, Body: bytes.NewReader(bodies[3]), IfMatch: aws.String(tags[3])})
	if !isPreconditionFailed(err) {
		t.Errorf("PUT with If-Match on an older version = %v; want 412", err)
	}
}

// TestLaneConflict: a 409 on the HEAD's PUT is resolved by reading back:
// not written (HEAD unchanged) is an error that leaves the store usable;
// written anyway is decided; another owner's version is ErrFenced.
func TestLaneConflict(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	l := NewLaneStore(e.faulty, "t", 2)
	mustAcquireLane(t, l, owner("a", 1))

	rule := e.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Match: isHeadPut, Action: faultproxy.Conflict, Times: 1})
	err := l.Put(ctx, sampleCheckpoint(1))
	if err == nil || errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "not written") || e.proxy.Fired(rule) != 1 {
		t.Fatalf("Put answered 409 without writing = %v (fired %d); want a not-written error, not ErrFenced", err, e.proxy.Fired(rule))
	}
	if h := e.head(2); h.Seq != 1 || h.Checkpoint.ID != 0 {
		t.Fatalf("HEAD after the refused Put = %+v", h)
	}
	mustPut(t, l, sampleCheckpoint(1))

	rule = e.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Match: isHeadPut, Action: faultproxy.ConflictAfter, Times: 1})
	mustPut(t, l, sampleCheckpoint(2))
	if h := e.head(2); e.proxy.Fired(rule) != 1 || h.Seq != 3 || h.Checkpoint.ID != 2 {
		t.Fatalf("HEAD after a Put written but answered 409 = %+v (fired %d); want checkpoint 2 decided", h, e.proxy.Fired(rule))
	}
	mustPut(t, l, sampleCheckpoint(3)) // the ETag read back is the one held

	// Another owner takes over just before the PUT is answered 409.
	var armed atomic.Bool
	armed.Store(true)
	other := NewLaneStore(e.direct, "t", 2)
	var takeover error
	e.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Action: faultproxy.Conflict,
		Match: func(r *http.Request) bool {
			if !isHeadPut(r) || !armed.CompareAndSwap(true, false) {
				return false
			}
			_, takeover = other.Acquire(context.WithoutCancel(r.Context()), owner("b", 2), nil)
			return true
		}})
	err = l.Put(ctx, sampleCheckpoint(4))
	if takeover != nil {
		t.Fatalf("the other owner's takeover: %v", takeover)
	}
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("Put answered 409 after another owner's takeover = %v; want ErrFenced", err)
	}
	if h := e.head(2); h.Epoch != 2 || h.Checkpoint.ID != 3 {
		t.Errorf("HEAD = %+v; want the takeover with checkpoint 3", h)
	}
}

// TestLaneReplyCut: the PUT lands and its reply is lost: Put returns nil
// (decided, found by reading back); if another owner takes over before the
// read, Put is ErrFenced although its record was written: the new owner
// holds it, and the fenced one runs no phase 2.
func TestLaneReplyCut(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	l := NewLaneStore(e.faulty, "t", 4)
	mustAcquireLane(t, l, owner("a", 1))
	rule := e.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Match: isHeadPut, Action: faultproxy.ResetAfter, Times: 1})
	mustPut(t, l, sampleCheckpoint(1))
	if h := e.head(4); e.proxy.Fired(rule) != 1 || h.Seq != 2 || h.Checkpoint.ID != 1 {
		t.Fatalf("HEAD after a Put whose reply was cut = %+v (fired %d); want checkpoint 1 decided", h, e.proxy.Fired(rule))
	}
	mustPut(t, l, sampleCheckpoint(2))

	// Cut the reply, then let another owner take over before anything else
	// of this owner reaches the store (a retry of the PUT, or the read).
	var armed, cut, once atomic.Bool
	armed.Store(true)
	other := NewLaneStore(e.direct, "t", 4)
	var taken *LaneHead
	var takeover error
	e.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Action: faultproxy.ResetAfter,
		Match: func(r *http.Request) bool {
			if isHeadPut(r) && armed.CompareAndSwap(true, false) {
				cut.Store(true)
				return true
			}
			return false
		}})
	e.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject, faultproxy.GetObject},
		Match: func(r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, "/"+LaneHeadFile) && cut.Load() && once.CompareAndSwap(false, true) {
				taken, takeover = other.Acquire(context.WithoutCancel(r.Context()), owner("b", 2), nil)
			}
			return false
		}})
	err := l.Put(ctx, sampleCheckpoint(3))
	if takeover != nil || taken == nil {
		t.Fatalf("the other owner's takeover: %v", takeover)
	}
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("Put whose reply was cut before another owner's takeover = %v; want ErrFenced", err)
	}
	if taken.Epoch != 2 || taken.Checkpoint == nil || taken.Checkpoint.ID != 3 {
		t.Errorf("the new owner's head = %+v; want epoch 2 holding checkpoint 3 (written, then taken over)", taken)
	}
	if err := l.Put(ctx, sampleCheckpoint(4)); !errors.Is(err, ErrFenced) {
		t.Errorf("a later Put of the fenced owner = %v", err)
	}
}

// TestLaneCorrupt: a defective HEAD is a *recovery.CorruptError naming it,
// for ReadLane, Acquire and ListLanes.
func TestLaneCorrupt(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	l := NewLaneStore(e.direct, "t", 5)
	mustAcquireLane(t, l, owner("a", 1))
	good, _ := e.raw(5)
	i := bytes.Index(good, []byte(`"seq":1`))
	flipped := bytes.Clone(good)
	flipped[i+len(`"seq":`)] = '2'
	otherLane := bytes.Replace(good, []byte(`"partition":5`), []byte(`"partition":6`), 1)
	key := l.Key()
	url := "s3://" + e.bucket + "/" + key
	for name, body := range map[string][]byte{
		"garbage":         []byte("not a lane head"),
		"checksum":        flipped,
		"another lane's":  otherLane,
		"trailing data":   append(bytes.Clone(good), []byte(`{}`)...),
		"empty":           nil,
		"no head":         []byte(`{"crc32c":"00000000"}`),
		"unknown version": []byte(`{"crc32c":"00000000","head":{"v":2}}`),
	} {
		if _, err := e.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &e.bucket, Key: &key, Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadLane(ctx, e.direct, "t", 5)
		var ce *recovery.CorruptError
		if !errors.As(err, &ce) || ce.File != url {
			t.Errorf("%s: ReadLane = %v; want a CorruptError naming %s", name, err, url)
		}
		if _, err := NewLaneStore(e.direct, "t", 5).Acquire(ctx, owner("b", 1), nil); !errors.As(err, &ce) {
			t.Errorf("%s: Acquire = %v; want a CorruptError", name, err)
		}
		if _, err := ListLanes(ctx, e.direct); !errors.As(err, &ce) {
			t.Errorf("%s: ListLanes = %v; want a CorruptError", name, err)
		}
	}
}

// TestListLanes: every HEAD of the state, sorted by topic and partition;
// another state's lanes are not listed; a stray object is a CorruptError.
func TestListLanes(t *testing.T) {
	e := newLaneEnv(t)
	ctx := t.Context()
	if heads, err := ListLanes(ctx, e.direct); err != nil || len(heads) != 0 {
		t.Fatalf("ListLanes of an empty state = %v, %v", heads, err)
	}
	for _, lane := range []struct {
		topic     string
		partition int32
	}{{"t", 10}, {"t", 2}, {"a", 1}, {"t", 0}} {
		mustAcquireLane(t, NewLaneStore(e.direct, lane.topic, lane.partition), owner("a", 1))
	}
	neighbour := MustNewStore(t, e.client, e.bucket, laneState+"-other")
	mustAcquireLane(t, NewLaneStore(neighbour, "t", 1), owner("a", 1))
	heads, err := ListLanes(ctx, e.direct)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range heads {
		got = append(got, fmt.Sprintf("%s/%d", h.Topic, h.Partition))
	}
	if want := []string{"a/1", "t/0", "t/2", "t/10"}; !slices.Equal(got, want) {
		t.Errorf("ListLanes = %q, want %q", got, want)
	}
	stray := laneState + "/lanes/t/notes.txt"
	if _, err := e.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &e.bucket, Key: &stray, Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	var ce *recovery.CorruptError
	if _, err := ListLanes(ctx, e.direct); !errors.As(err, &ce) || !strings.Contains(err.Error(), stray) {
		t.Errorf("ListLanes with a stray object = %v; want a CorruptError naming it", err)
	}
}

// TestSweepEpochs: the staging data of a lane's epochs below the given one
// goes, unless kept; the newer epochs, other lanes and published objects
// stay.
func TestSweepEpochs(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	const lane = "part-t.3"
	persisted := func(target string, times int) record {
		w := open(t, b, target)
		var r record
		for i := range times {
			write(t, w, pattern(i+1, 10))
			_, r = persist(t, w)
		}
		w.Close()
		return r
	}
	orphan1 := persisted("d/part-t.3-e1-0-r1-1.txt", 1)
	w := open(t, b, "d/part-t.3-e1-0-r1-2.txt")
	write(t, w, pattern(3, 10))
	keptR, kept1 := persist(t, w)
	w.Close()
	orphan2 := persisted("d/part-t.3-e2-0-r2-1.txt", 2)
	w = open(t, b, "d/part-t.3-e2-0-r2-2.txt")
	write(t, w, pattern(4, 10))
	keptP, kept2 := closeForCommit(t, w)
	w = open(t, b, "d/part-t.3-e2-0-r2-3.txt")
	write(t, w, pattern(5, 10))
	pub, _ := closeForCommit(t, w)
	if err := b.Commit(ctx, pub); err != nil {
		t.Fatal(err)
	}
	// Not below epoch 3, or not of the lane's epochs at all.
	var stays []record
	for _, target := range []string{
		"d/part-t.3-e3-0-r3-1.txt", "part-t.3-e10-0-r4-1.txt", "d/part-t.30-e1-0-r1-1.txt",
		"d/part-u.3-e1-0-r1-1.txt", "d/part-t.3-ex-0-r1-1.txt", "d/part-t.3-e-0-r1-1.txt", "d/part-t.3-e1.txt",
	} {
		stays = append(stays, persisted(target, 1))
	}
	if _, err := b.SweepEpochs(ctx, "", 3, nil); err == nil {
		t.Error("SweepEpochs of an empty lane succeeded")
	}
	if _, err := b.SweepEpochs(ctx, "d/part-t.3", 3, nil); err == nil {
		t.Error("SweepEpochs of a lane with a '/' succeeded")
	}
	var swept []map[string]int64
	for range 2 {
		n, err := b.SweepEpochs(ctx, lane, 3, []json.RawMessage{keptR, keptP})
		if err != nil {
			t.Fatal(err)
		}
		swept = append(swept, n)
	}
	// The two orphans' uploads; their tails (1 + 2) and markers.
	if n := swept[0]; n[driver.SweptUpload] != 2 || n[driver.SweptStagingObject] != 5 {
		t.Errorf("first sweep counted %v, want 2 uploads and 5 staging objects", n)
	}
	if n := swept[1]; n[driver.SweptUpload] != 0 || n[driver.SweptStagingObject] != 0 {
		t.Errorf("second sweep counted %v, want nothing", n)
	}
	gone := []string{orphan1.Tail[0].Key, orphan2.Tail[0].Key, orphan2.Tail[1].Key, b.markerKey(orphan1.Target), b.markerKey(orphan2.Target)}
	for _, k := range gone {
		if h.exists(t, k) {
			t.Errorf("%s survived the sweep", k)
		}
	}
	for _, r := range []record{orphan1, orphan2} {
		if _, err := h.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &h.bucket, Key: &r.Key, UploadId: &r.UploadID}); !isNoSuchUpload(err) {
			t.Errorf("upload of %s survived the sweep: %v", r.Target, err)
		}
	}
	for _, r := range append(stays, kept1, kept2) {
		if _, err := h.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &h.bucket, Key: &r.Key, UploadId: &r.UploadID}); err != nil {
			t.Errorf("upload of %s is gone: %v", r.Target, err)
		}
		if !h.exists(t, b.markerKey(r.Target)) {
			t.Errorf("marker of %s is gone", r.Target)
		}
		for _, tr := range r.Tail {
			if !h.exists(t, tr.Key) {
				t.Errorf("tail %s of %s is gone", tr.Key, r.Target)
			}
		}
	}
	if !h.exists(t, h.key("d/part-t.3-e2-0-r2-3.txt")) {
		t.Error("a published object of epoch 2 is gone")
	}
	// The kept ones still work.
	w = resume(t, b, keptR, 10)
	p, _ := closeForCommit(t, w)
	for _, c := range []json.RawMessage{p, keptP} {
		if err := b.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// The probe of conditional writes passes on MinIO and fails, naming the
// state, on a store that ignores the conditions (simulated by a client
// that drops If-None-Match and If-Match before sending).
func TestCheckConditionalWrites(t *testing.T) {
	srv := requireMinio(t)
	bucket := srv.NewBucket(t)
	ok := MustNewStore(t, srv.Client(t), bucket, "out/_filesink")
	if err := ok.CheckConditionalWrites(t.Context()); err != nil {
		t.Fatalf("MinIO: %v", err)
	}
	drop := func(o *s3api.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("drop-conditions",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if p, ok := in.Parameters.(*s3api.PutObjectInput); ok {
						p.IfNoneMatch, p.IfMatch = nil, nil
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
	bad := MustNewStore(t, srv.Client(t, drop), bucket, "other/_filesink")
	err := bad.CheckConditionalWrites(t.Context())
	if !errors.Is(err, ErrConditionsIgnored) {
		t.Fatalf("a store ignoring the conditions: %v, want ErrConditionsIgnored", err)
	}
	if !strings.Contains(err.Error(), "s3://"+bucket+"/other/_filesink") {
		t.Errorf("the error does not name the state: %v", err)
	}
}

// TestSweepUploadWithoutMarker: an upload whose marker is gone (a paused
// writer created it after a sweep had found its marker, no upload yet, and
// deleted the marker) is still swept, by SweepEpochs and by Sweep, though
// MinIO lists no upload for a prefix that is not a whole key; one of an
// epoch not below the given one stays.
func TestSweepUploadWithoutMarker(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	markerless := func(target string) record {
		w := open(t, b, target)
		write(t, w, pattern(1, 10))
		_, r := persist(t, w)
		w.Close()
		mkey := b.markerKey(target)
		if _, err := h.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &h.bucket, Key: &mkey}); err != nil {
			t.Fatal(err)
		}
		for _, tr := range r.Tail {
			if _, err := h.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &h.bucket, Key: aws.String(tr.Key)}); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	old := markerless("d/part-t.3-e1-0-r1-1.txt")
	newer := markerless("d/part-t.3-e3-0-r3-1.txt")
	other := markerless("d/part-u-0-r1-1.txt")
	n, err := b.SweepEpochs(ctx, "part-t.3", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n[driver.SweptUpload] != 1 {
		t.Errorf("SweepEpochs counted %v, want 1 upload", n)
	}
	if n, err = b.Sweep(ctx, "part-u-", nil); err != nil || n[driver.SweptUpload] != 1 {
		t.Errorf("Sweep = %v, %v; want 1 upload", n, err)
	}
	for _, r := range []record{old, other} {
		if _, err := h.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &h.bucket, Key: &r.Key, UploadId: &r.UploadID}); !isNoSuchUpload(err) {
			t.Errorf("upload of %s, without a marker, survived the sweep: %v", r.Target, err)
		}
	}
	if _, err := h.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &h.bucket, Key: &newer.Key, UploadId: &newer.UploadID}); err != nil {
		t.Errorf("upload of %s (epoch 3) is gone: %v", newer.Target, err)
	}
}
