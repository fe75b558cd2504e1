package group_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/group"
	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/source/kafka"
)

const partitions = 12

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) takeovers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, eps := range e.epochs {
		n += len(eps)
	}
	return n
}

// Three members join one after the other and one leaves, while records
// keep coming: every record is published exactly once, and the lanes that
// moved were handed off with growing epochs.
func TestGroupRebalances(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	e.produce(ctx, 100)
	a := e.start(ctx, false, nil)
	waitUntil(t, "the first member owns every lane", func() bool { return e.takeovers() >= partitions })
	e.produce(ctx, 100)
	b := e.start(ctx, false, nil)
	waitUntil(t, "the second member took lanes over", func() bool { return e.takeovers() > partitions })
	e.produce(ctx, 100)
	c := e.start(ctx, false, nil)
	n := e.takeovers()
	waitUntil(t, "the third member took lanes over", func() bool { return e.takeovers() > n })
	e.produce(ctx, 100)
	b.halt(t) // scale down: its lanes move to a and c
	e.produce(ctx, 100)
	e.waitCommitted(ctx)
	a.halt(t)
	c.halt(t)
	e.check(ctx)
	if b.res.Released == 0 {
		t.Errorf("the member that left released no lane: %+v", b.res)
	}
}

// Bounded: two members read every partition to the end offset it had at
// the job's first start; both return on their own once every lane of the
// job is finished, and records produced later are not read.
func TestGroupBounded(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	e.produce(ctx, 200)
	waitFinished(t, e.start(ctx, true, nil), e.start(ctx, true, nil))
	e.check(ctx)
}

// waitFinished waits, up to 2 minutes, for bounded members to return
// with the job finished.
func waitFinished(t *testing.T, ms ...*member) {
	t.Helper()
	for _, m := range ms {
		select {
		case <-m.done:
		case <-time.After(2 * time.Minute):
			t.Fatal("a bounded member did not finish")
		}
		if m.err != nil || !m.res.Finished {
			t.Fatalf("bounded member: %+v, %v", m.res, m.err)
		}
	}
}

// errCrash is what a hook returns to crash a member at its point.
var errCrash = errors.New("crash at a named point")

// crashOnce returns a hook that fails the first time point is reached.
func crashOnce(point string, hit *sync.Once, fired chan struct{}) func(string) error {
	return func(at string) error {
		if at != point {
			return nil
		}
		err := error(nil)
		hit.Do(func() { err = fmt.Errorf("%w: %s", errCrash, point); close(fired) })
		return err
	}
}

// A member crashes at each named point of a takeover, a handoff and a
// checkpoint; it is started again, and the job goes on: every record
// exactly once.
func TestGroupCrashPoints(t *testing.T) {
	points := []struct {
		point string
		first bool   // the first member crashes (else the one joining)
		then  string // then the joiner crashes here, taking the first's lanes over
	}{
		{"assign:acquired", false, ""}, // the joiner, right after its takeover write
		{"lane:swept", false, ""},      // the joiner, after sweeping older epochs
		{"revoke:stopped", true, ""},   // the first, after a handoff's final checkpoint, before its release
		{"phase1", true, ""},           // a checkpoint prepared, not decided
		{"decided", true, ""},          // decided, not published
		{"committed:1", true, ""},      // one file of a checkpoint published
		// one file of a checkpoint published; the joiner takes the lanes
		// over and crashes between publishing two inherited files
		{"committed:1", true, "recover:committed:1"},
	}
	for _, tc := range points {
		t.Run(tc.point+tc.then, func(t *testing.T) {
			ctx := t.Context()
			e := newEnv(t, partitions)
			var once sync.Once
			fired := make(chan struct{})
			crash := func(cfg *group.Config) {
				switch tc.point {
				case "assign:acquired", "lane:swept", "revoke:stopped":
					h := crashOnce(tc.point, &once, fired)
					cfg.Hook = func(point string, _ kafka.LaneID) error { return h(point) }
				default:
					cfg.Pipeline.CommitterOptions = append(cfg.Pipeline.CommitterOptions, committer.WithHook(crashOnce(tc.point, &once, fired)))
				}
			}
			e.produce(ctx, 100)
			var modA, modB func(*group.Config)
			if tc.first {
				modA = crash
			} else {
				modB = crash
			}
			var thenOnce sync.Once
			thenFired := make(chan struct{})
			if tc.then != "" {
				modB = func(cfg *group.Config) {
					cfg.Pipeline.CommitterOptions = append(cfg.Pipeline.CommitterOptions, committer.WithHook(crashOnce(tc.then, &thenOnce, thenFired)))
				}
			}
			a := e.start(ctx, false, modA)
			waitUntil(t, "the first member owns every lane", func() bool { return e.takeovers() >= partitions })
			e.produce(ctx, 100)
			b := e.start(ctx, false, modB)
			select {
			case <-fired:
			case <-time.After(time.Minute):
				t.Fatalf("the crash point %s was never reached", tc.point)
			}
			crashed := a
			if !tc.first {
				crashed = b
			}
			<-crashed.done
			if !errors.Is(crashed.err, errCrash) {
				t.Fatalf("the crashed member returned %v", crashed.err)
			}
			members := []*member{a, b}
			if tc.then != "" {
				select {
				case <-thenFired:
				case <-time.After(time.Minute):
					t.Fatalf("the crash point %s was never reached", tc.then)
				}
				<-b.done
				if !errors.Is(b.err, errCrash) {
					t.Fatalf("the joiner returned %v", b.err)
				}
				members = append(members, e.start(ctx, false, nil))
			}
			members = append(members, e.start(ctx, false, nil))
			e.produce(ctx, 100)
			e.waitCommitted(ctx)
			for _, m := range members {
				select {
				case <-m.done: // crashed
				default:
					m.halt(t)
				}
			}
			e.check(ctx)
		})
	}
}

// A member crashes in the middle of a takeover's sweep: it aborts the
// orphaned uploads that a crashed owner left, but every request that would
// delete their staging objects fails (its S3 goes through the fault
// proxy), so it stops with the sweep half done. The next owner sweeps the
// rest: every record exactly once, and no upload or staging object of an
// older owner is left once the job is halted.
func TestGroupCrashDuringSweep(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	srv := minio.Shared(t)
	proxy := faultproxy.New(t, srv.Endpoint())
	proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.DeleteObjects}, Action: faultproxy.InternalError})

	// A crashes in a checkpoint's phase 1: its lanes' open parts stay
	// behind as uploads that no record references.
	var once sync.Once
	fired := make(chan struct{})
	e.produce(ctx, 100)
	a := e.start(ctx, false, func(cfg *group.Config) {
		cfg.Pipeline.CommitterOptions = append(cfg.Pipeline.CommitterOptions, committer.WithHook(crashOnce("phase1", &once, fired)))
	})
	<-a.done
	if !errors.Is(a.err, errCrash) {
		t.Fatalf("the first member returned %v, want its crash at phase1", a.err)
	}
	if n := len(leftovers(t, e)); n == 0 {
		t.Fatal("the crash at phase1 left no staging data: the sweep would have nothing to do")
	}

	// B sweeps through the proxy and stops in the middle.
	b := e.start(ctx, false, func(cfg *group.Config) {
		be, err := s3.New(srv.ClientAt(t, proxy.URL()), e.bucket, "out", s3.WithMaxParts(s3.MaxParts-1))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Backend = be
	})
	<-b.done
	if b.err == nil || !strings.Contains(b.err.Error(), "staging objects") {
		t.Fatalf("the second member returned %v, want its sweep's failure to delete staging objects", b.err)
	}
	if proxy.Requests(faultproxy.AbortMultipartUpload) == 0 || proxy.Injected(faultproxy.DeleteObjects) == 0 {
		t.Fatalf("the second member did not stop in the middle of a sweep (it should abort uploads, then fail to delete staging objects):\n%s", proxy.Stats())
	}
	half := leftovers(t, e)
	if len(half) == 0 {
		t.Fatal("nothing left after the half-done sweep")
	}
	t.Logf("after the sweep stopped half-way: %d left, e.g. %s", len(half), half[0])

	c := e.start(ctx, false, nil)
	e.produce(ctx, 100)
	e.waitCommitted(ctx)
	c.halt(t)
	e.check(ctx)
	if left := leftovers(t, e); len(left) > 0 {
		t.Errorf("%d upload(s) and staging object(s) left after the next owner's sweep and a clean halt, e.g. %s", len(left), left[0])
	}
}

// leftovers lists the multipart uploads and staging objects of the
// output.
func leftovers(t *testing.T, e *env) []string {
	return miniotest.Leftovers(t, e.client, e.bucket, "out/"+s3.StagingDir+"/")
}
