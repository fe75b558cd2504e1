package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
)

// Part names of subtask 0 of the sink "part", run "r1"; ns0 is its Sweep
// namespace.
const (
	ns0     = "part-0-"
	target1 = "b1/part-0-r1-1.txt"
	target2 = "b1/part-0-r1-2.txt"
)

var (
	hello = []byte("hello, ")
	world = []byte("world\n")
)

func testPublishExactBytes(t *testing.T, e *env) {
	w := e.open(target1)
	e.write(w, hello, world, []byte{0, 1, 2, 0xff})
	p := e.closeForCommit(w)
	e.commit(p)
	e.wantTarget(target1, concat(hello, world, []byte{0, 1, 2, 0xff}))
	e.wantVisible(target1)
}

func testPublishEmpty(t *testing.T, e *env) {
	w := e.open(target1)
	p := e.closeForCommit(w)
	e.commit(p)
	e.wantTarget(target1, nil)
	e.wantVisible(target1)
}

func testPublishLarge(t *testing.T, e *env) {
	// Chunks of uneven sizes around common buffer and part boundaries, with
	// Persist calls in between.
	sizes := []int{1, 4095, 4097, 64 << 10, (1 << 20) + 3, 17, 3 << 20, 5}
	w := e.open(target1)
	var all []byte
	for i, n := range sizes {
		c := pattern(i+1, n)
		e.write(w, c)
		all = append(all, c...)
		if i%3 == 1 {
			e.persist(w)
		}
	}
	p := e.closeForCommit(w)
	e.commit(p)
	e.wantTarget(target1, all)
}

func testPublishNested(t *testing.T, e *env) {
	targets := []string{"part-0-r1-1", "a/b/c/part-0-r1-2.jsonl", "a/b/part-0-r1-3.jsonl", "dt=2026-01-02/part-0-r1-4.jsonl"}
	for i, tg := range targets {
		e.publish(tg, pattern(10+i, 100+i))
	}
	for i, tg := range targets {
		e.wantTarget(tg, pattern(10+i, 100+i))
	}
	e.wantVisible(targets...)
}

func testNothingVisibleBeforeCommit(t *testing.T, e *env) {
	e.wantVisible()
	w1 := e.open(target1)
	e.wantVisible()
	e.write(w1, hello)
	e.wantVisible()
	e.persist(w1)
	e.wantVisible()
	e.write(w1, world)
	p1 := e.closeForCommit(w1)
	e.wantVisible()
	e.wantNoTarget(target1)

	// A second part, persisted and closed without publishing.
	w2 := e.open(target2)
	e.write(w2, world)
	e.persist(w2)
	e.close(w2)
	e.wantVisible()
	e.wantNoTarget(target2)

	e.commit(p1)
	e.wantVisible(target1)
	e.wantTarget(target1, concat(hello, world))
	e.wantNoTarget(target2)
}

func testCanceledContext(t *testing.T, e *env) {
	canceled, cancel := context.WithCancel(e.ctx)
	cancel()
	if w, err := e.backend().Open(canceled, target2); err == nil {
		// Not required to fail, but if it succeeds it must be a real writer.
		e.write(w, hello)
		e.close(w)
	}
	w := e.open(target1)
	e.write(w, hello)
	p := e.closeForCommit(w)
	err := e.backend().Commit(canceled, p)
	if err != nil {
		// Nothing half-published.
		e.wantNoTarget(target1)
		e.wantVisible()
		e.commit(p)
	}
	e.wantTarget(target1, hello)
	e.wantVisible(target1)
}

func testCommitTwice(t *testing.T, e *env) {
	p := e.publish(target1, hello)
	e.commit(p)
	e.commit(p)
	e.wantTarget(target1, hello)
	e.wantVisible(target1)
}

func testCommitAfterRestart(t *testing.T, e *env) {
	p := e.publish(target1, hello)
	// A new process commits the same pending again: the staging data is gone
	// and the target exists with the recorded length.
	b2 := e.h.Backend()
	if err := b2.Commit(e.ctx, p); err != nil {
		t.Fatalf("re-Commit after restart: %v", err)
	}
	e.wantTarget(target1, hello)
	e.wantVisible(target1)
}

func testCommitBothMissing(t *testing.T, e *env) {
	tm := e.tamper()
	p := e.publish(target1, hello)
	if err := tm.DeleteTarget(e.ctx, target1); err != nil {
		t.Fatal(err)
	}
	err := e.backend().Commit(e.ctx, p)
	wantErr(t, "Commit with staging and target both missing", err, committer.ErrDataLoss)
	e.wantVisible()
}

func testCommitStagingMissingBeforeCommit(t *testing.T, e *env) {
	tm := e.tamper()
	w := e.open(target1)
	e.write(w, hello)
	p := e.closeForCommit(w)
	if err := tm.DeleteStaging(e.ctx, p); err != nil {
		t.Fatal(err)
	}
	err := e.backend().Commit(e.ctx, p)
	wantErr(t, "Commit of a never-published pending whose staging data is gone", err, committer.ErrDataLoss)
	e.wantVisible()
}

func testCommitTargetOtherLength(t *testing.T, e *env) {
	tm := e.tamper()
	p := e.publish(target1, hello)
	other := []byte("something else entirely")
	if err := tm.DeleteTarget(e.ctx, target1); err != nil {
		t.Fatal(err)
	}
	if err := tm.PutTarget(e.ctx, target1, other); err != nil {
		t.Fatal(err)
	}
	err := e.backend().Commit(e.ctx, p)
	wantErr(t, "re-Commit with the staging gone and a target of another length", err, committer.ErrDataLoss)
	e.wantTarget(target1, other)
}

func testCommitStagingShorter(t *testing.T, e *env) {
	tm := e.tamper()
	w := e.open(target1)
	e.write(w, hello, world)
	p := e.closeForCommit(w)
	if err := tm.TruncateStaging(e.ctx, p, int64(len(hello))); err != nil {
		t.Fatal(err)
	}
	err := e.backend().Commit(e.ctx, p)
	wantErr(t, "Commit with staging data shorter than recorded", err, committer.ErrDataLoss)
	e.wantVisible()
}

// foreignTarget checks that a target written by someone else before Commit
// is neither replaced nor taken for ours, and that our staging data
// survives the refusal.
func foreignTarget(t *testing.T, e *env, foreign []byte) {
	tm := e.tamper()
	w := e.open(target1)
	e.write(w, hello, world)
	p := e.closeForCommit(w)
	if err := tm.PutTarget(e.ctx, target1, foreign); err != nil {
		t.Fatal(err)
	}
	err := e.backend().Commit(e.ctx, p)
	wantErr(t, "Commit over a foreign target", err, committer.ErrAlreadyExists)
	e.wantTarget(target1, foreign)
	// Refused twice the same way (no state changed by the first refusal).
	err = e.backend().Commit(e.ctx, p)
	wantErr(t, "second Commit over a foreign target", err, committer.ErrAlreadyExists)
	e.wantTarget(target1, foreign)
	// The staging data was kept: once the foreign file is gone, ours
	// publishes.
	if err := tm.DeleteTarget(e.ctx, target1); err != nil {
		t.Fatal(err)
	}
	e.commit(p)
	e.wantTarget(target1, concat(hello, world))
}

func testCommitForeignTargetOtherLength(t *testing.T, e *env) {
	foreignTarget(t, e, []byte("foreign"))
}

func testCommitForeignTargetSameLength(t *testing.T, e *env) {
	foreign := []byte("HELLO, WORLD\n")
	if len(foreign) != len(hello)+len(world) {
		t.Fatal("test bug: lengths differ")
	}
	foreignTarget(t, e, foreign)
}

func testCommitMalformed(t *testing.T, e *env) {
	for _, p := range []string{`not json`, `{}`, `null`, `""`, `[]`} {
		if err := e.backend().Commit(e.ctx, json.RawMessage(p)); err == nil {
			t.Errorf("Commit(%s) succeeded, want an error", p)
		}
	}
	e.wantVisible()
}

func testOpenTargetExists(t *testing.T, e *env) {
	tm := e.tamper()
	if err := tm.PutTarget(e.ctx, target1, world); err != nil {
		t.Fatal(err)
	}
	if w, err := e.backend().Open(e.ctx, target1); err == nil {
		w.Close()
		t.Fatal("Open of an existing target succeeded")
	}
	e.wantTarget(target1, world)
}

func testOpenPublishedTarget(t *testing.T, e *env) {
	e.publish(target1, hello)
	if w, err := e.backend().Open(e.ctx, target1); err == nil {
		w.Close()
		t.Fatal("Open of a published target succeeded")
	}
	e.wantTarget(target1, hello)
}

func testOpenStagingExists(t *testing.T, e *env) {
	w := e.open(target1)
	e.write(w, hello)
	r := e.persist(w)
	if w2, err := e.backend().Open(e.ctx, target1); err == nil {
		w2.Close()
		t.Fatal("Open of a target whose staging data exists succeeded")
	}
	// The first writer is intact, and so is its staging data.
	e.write(w, world)
	e.close(w)
	w = e.resume(r, int64(len(hello)))
	e.write(w, world)
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, concat(hello, world))
}

func testOpenInvalidTargets(t *testing.T, e *env) {
	bad := []string{
		"", "/", "/abs", "/abs/part-0", ".", "..", "../part-0", "a/../../part-0",
		"a/../part-0", "./part-0", "a/./part-0", ".part-0", "a/.part-0",
		"_part-0", "a/_b/part-0", ".a/part-0", "_temporary/part-0",
		"a//part-0", "a/", "part-0/", "a/..",
	}
	for _, tg := range bad {
		if w, err := e.backend().Open(e.ctx, tg); err == nil {
			w.Close()
			t.Errorf("Open(%q) succeeded, want an error", tg)
		}
	}
	e.wantVisible()
}

func testResumeDiscards(t *testing.T, e *env) {
	a, junk, c := pattern(1, 100), pattern(2, 77), pattern(3, 55)
	w := e.open(target1)
	e.write(w, a)
	r := e.persist(w)
	e.write(w, junk)
	e.close(w)

	w = e.resume(r, int64(len(a)))
	e.write(w, c)
	if got := w.Size(); got != int64(len(a)+len(c)) {
		t.Fatalf("Size() = %d, want %d", got, len(a)+len(c))
	}
	p := e.closeForCommit(w)
	e.commit(p)
	e.wantTarget(target1, concat(a, c))
	e.wantVisible(target1)
}

func testResumeNothingWritten(t *testing.T, e *env) {
	w := e.open(target1)
	e.write(w, hello)
	r := e.persist(w)
	e.write(w, world)
	e.close(w)
	w = e.resume(r, int64(len(hello)))
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, hello)
}

func testPersistWithoutWrites(t *testing.T, e *env) {
	w := e.open(target1)
	r0 := e.persist(w) // empty part
	e.write(w, hello)
	r1 := e.persist(w)
	r2 := e.persist(w) // nothing new
	e.close(w)

	for _, x := range []struct {
		r    json.RawMessage
		want []byte
	}{{r2, hello}, {r1, hello}, {r0, nil}} {
		w := e.resume(x.r, int64(len(x.want)))
		e.close(w)
	}
	w = e.resume(r0, 0)
	e.write(w, world)
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, world)
}

func testResumeOlderCheckpoint(t *testing.T, e *env) {
	// Checkpoint 2's record was never written, so recovery resumes from
	// checkpoint 1 although the writer had persisted more.
	a, b, c := pattern(1, 10), pattern(2, 20), pattern(3, 30)
	w := e.open(target1)
	e.write(w, a)
	r1 := e.persist(w)
	e.write(w, b)
	r2 := e.persist(w)
	e.write(w, c)
	e.close(w)

	w = e.resume(r2, int64(len(a)+len(b)))
	e.close(w)
	w = e.resume(r1, int64(len(a)))
	e.write(w, c)
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, concat(a, c))
}

func testResumeTwice(t *testing.T, e *env) {
	a, x, y, d := pattern(1, 40), pattern(2, 41), pattern(3, 42), pattern(4, 43)
	w := e.open(target1)
	e.write(w, a)
	r := e.persist(w)
	e.write(w, x)
	e.close(w)

	// First recovery from r: writes and even persists more, then dies.
	w = e.resume(r, int64(len(a)))
	e.write(w, y)
	e.persist(w)
	e.write(w, x)
	e.close(w)

	// Second recovery from the same r: same starting point.
	w = e.resume(r, int64(len(a)))
	e.write(w, d)
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, concat(a, d))
}

// testResumeReleased is what the file sink does at its open-file limit:
// persist and close a writer, resume it from that persist and go on
// writing, several times; the part holds every byte once.
func testResumeReleased(t *testing.T, e *env) {
	a, b, c := pattern(1, 300), pattern(2, 7), pattern(3, 1000)
	w := e.open(target1)
	e.write(w, a)
	r := e.persist(w)
	e.close(w)
	w = e.resume(r, int64(len(a)))
	e.write(w, b)
	r = e.persist(w)
	e.close(w)
	w = e.resume(r, int64(len(a)+len(b)))
	r = e.persist(w) // released again without a write
	e.close(w)
	w = e.resume(r, int64(len(a)+len(b)))
	e.write(w, c)
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, concat(a, b, c))
}

func testResumeStagingShorter(t *testing.T, e *env) {
	tm := e.tamper()
	w := e.open(target1)
	e.write(w, hello, world)
	r := e.persist(w)
	e.close(w)
	if err := tm.TruncateStaging(e.ctx, r, int64(len(hello))); err != nil {
		t.Fatal(err)
	}
	w, err := e.backend().Resume(e.ctx, r)
	if err == nil {
		w.Close()
	}
	wantErr(t, "Resume with staging data shorter than recorded", err, committer.ErrDataLoss)
}

func testResumeStagingMissing(t *testing.T, e *env) {
	tm := e.tamper()
	w := e.open(target1)
	e.write(w, hello)
	r := e.persist(w)
	e.close(w)
	if err := tm.DeleteStaging(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	w, err := e.backend().Resume(e.ctx, r)
	if err == nil {
		w.Close()
	}
	wantErr(t, "Resume with staging data missing", err, committer.ErrDataLoss)
}

// testRebuildBeforeCommit: the staging data of a decided part is lost
// before its commit. Commit reports data loss, a new part opened for the
// same target takes the same bytes again and publishes them, and the lost
// pending committed again afterwards (a restart after the rebuild) is
// never an overwrite: nil, or a loud error, with the rebuilt target
// unchanged.
func testRebuildBeforeCommit(t *testing.T, e *env) {
	tm := e.tamper()
	lost := e.pending(target1, hello)
	if err := tm.DeleteStaging(e.ctx, lost); err != nil {
		t.Fatal(err)
	}
	err := e.backend().Commit(e.ctx, lost)
	wantErr(t, "Commit of a pending whose staging data is gone", err, committer.ErrDataLoss)
	w := e.rebuild(lost)
	e.write(w, hello[:3], hello[3:])
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, hello)
	e.wantVisible(target1)
	// A restart that commits the lost pending again.
	err = e.h.Backend().Commit(e.ctx, lost)
	if err != nil && !errors.Is(err, committer.ErrDataLoss) && !errors.Is(err, committer.ErrAlreadyExists) {
		t.Errorf("Commit of the lost pending after the rebuild: %v, want nil, data loss or already exists", err)
	}
	e.wantTarget(target1, hello)
}

// testRebuildBeforeResume: the staging data of an in-progress part is
// lost before its resume. Resume reports data loss, a new part opened for
// the same target takes the bytes again, persists, resumes from that and
// goes on.
func testRebuildBeforeResume(t *testing.T, e *env) {
	tm := e.tamper()
	lost := e.persisted(target1, hello)
	if err := tm.DeleteStaging(e.ctx, lost); err != nil {
		t.Fatal(err)
	}
	w, err := e.h.Backend().Resume(e.ctx, lost)
	if err == nil {
		w.Close()
	}
	wantErr(t, "Resume with the staging data gone", err, committer.ErrDataLoss)
	w = e.rebuild(lost)
	e.write(w, hello)
	r := e.persist(w)
	e.close(w)
	w = e.resume(r, int64(len(hello)))
	e.write(w, world)
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, append(slices.Clone(hello), world...))
}

// testRebuildStagingShorter: what is left of short staging data is
// replaced by the rebuild, for a pending and a resumable.
func testRebuildStagingShorter(t *testing.T, e *env) {
	tm := e.tamper()
	for i, lost := range []json.RawMessage{e.pending(target1, hello), e.persisted(target2, hello)} {
		if err := tm.TruncateStaging(e.ctx, lost, 2); err != nil {
			t.Fatal(err)
		}
		w := e.rebuild(lost)
		e.write(w, world)
		e.commit(e.closeForCommit(w))
		e.wantTarget([]string{target1, target2}[i], world)
	}
}

// testRebuildTargetExists: a rebuild never replaces a published file.
func testRebuildTargetExists(t *testing.T, e *env) {
	lost := e.publish(target1, hello)
	w, err := e.backend().Rebuild(e.ctx, lost)
	if err == nil {
		w.Close()
	}
	wantErr(t, "Rebuild of a published target", err, committer.ErrAlreadyExists)
	e.wantTarget(target1, hello)
}

// rebuild starts the rebuild of lost.
func (e *env) rebuild(lost json.RawMessage) driver.PartWriter {
	e.t.Helper()
	w, err := e.backend().Rebuild(e.ctx, lost)
	if err != nil {
		e.t.Fatalf("Rebuild(%s): %v", lost, err)
	}
	return w
}

func testResumeMalformed(t *testing.T, e *env) {
	for _, r := range []string{`not json`, `{}`, `null`, `""`, `[]`} {
		if w, err := e.backend().Resume(e.ctx, json.RawMessage(r)); err == nil {
			w.Close()
			t.Errorf("Resume(%s) succeeded, want an error", r)
		}
	}
}

// persisted opens target, writes content, persists and closes it.
func (e *env) persisted(target string, content []byte) json.RawMessage {
	e.t.Helper()
	w := e.open(target)
	e.write(w, content)
	r := e.persist(w)
	e.close(w)
	return r
}

func (e *env) pending(target string, content []byte) json.RawMessage {
	e.t.Helper()
	w := e.open(target)
	e.write(w, content)
	return e.closeForCommit(w)
}

func testSweep(t *testing.T, e *env) {
	const (
		resumable = iota // persisted and closed
		pending          // closed for commit, not committed
		published        // committed: a finished target
	)
	type part struct {
		target string
		kind   int
		keep   bool // in keep
		mine   bool // staging data in namespace ns0
	}
	parts := []part{
		{"b1/part-0-r1-1.txt", resumable, false, true},    // orphan resumable
		{"b1/part-0-r1-2.txt", pending, false, true},      // orphan pending
		{"b2/x/part-0-r0-9.txt", resumable, false, true},  // orphan of an older run, nested
		{"part-0-r1-3.txt", resumable, false, true},       // orphan at top level
		{"b1/part-0-r1-4.txt", resumable, true, true},     // kept resumable
		{"b2/part-0-r1-5.txt", pending, true, true},       // kept pending
		{"b1/part-1-r1-1.txt", resumable, false, false},   // subtask 1
		{"b1/part-10-r1-1.txt", resumable, false, false},  // subtask 10
		{"b1/other-0-r1-1.txt", pending, false, false},    // another prefix
		{"b1/xpart-0-r1-1.txt", resumable, false, false},  // namespace inside the name
		{"b3/part-0-r1-6.txt", published, false, true},    // finished, same namespace
		{"part-0-r1-21.txt", published, false, true},      // finished at top level
		{"b4/y/part-0-r1-41.txt", published, false, true}, // finished, nested
		{"b1/part-1-r1-2.txt", published, false, false},   // finished, subtask 1
	}
	records := map[string]json.RawMessage{}
	var keep, visible []string
	var keepData []json.RawMessage
	for i, p := range parts {
		content := pattern(100+i, 20+i)
		switch p.kind {
		case published:
			e.publish(p.target, content)
			visible = append(visible, p.target)
			continue
		case pending:
			records[p.target] = e.pending(p.target, content)
		default:
			records[p.target] = e.persisted(p.target, content)
		}
		if p.keep {
			keep = append(keep, p.target)
			keepData = append(keepData, records[p.target])
		}
	}
	e.wantVisible(visible...)

	if _, err := e.backend().Sweep(e.ctx, ns0, keepData); err != nil {
		t.Fatalf("Sweep(%q, keep %q): %v", ns0, keep, err)
	}
	e.wantVisible(visible...)
	for i, p := range parts {
		content := pattern(100+i, 20+i)
		if p.kind == published {
			e.wantTarget(p.target, content)
			continue
		}
		r := records[p.target]
		swept := p.mine && !p.keep
		if p.kind == pending {
			err := e.backend().Commit(e.ctx, r)
			switch {
			case swept && !errors.Is(err, committer.ErrDataLoss):
				t.Errorf("Commit of %s after Sweep: %v; want ErrDataLoss (its staging data should have been swept)", p.target, err)
			case !swept && err != nil:
				t.Errorf("Commit of %s after Sweep: %v; its staging data should have been kept", p.target, err)
			case !swept:
				e.wantTarget(p.target, content)
			}
			continue
		}
		w, err := e.backend().Resume(e.ctx, r)
		switch {
		case swept && !errors.Is(err, committer.ErrDataLoss):
			t.Errorf("Resume of %s after Sweep: %v; want ErrDataLoss (its staging data should have been swept)", p.target, err)
		case !swept && err != nil:
			t.Errorf("Resume of %s after Sweep: %v; its staging data should have been kept", p.target, err)
		case !swept && w.Size() != int64(len(content)):
			t.Errorf("Resume of %s after Sweep: Size() = %d, want %d", p.target, w.Size(), len(content))
		}
		if err == nil {
			w.Close()
		}
	}
}

func testSweepEmpty(t *testing.T, e *env) {
	if _, err := e.backend().Sweep(e.ctx, ns0, nil); err != nil {
		t.Fatalf("Sweep of an empty store: %v", err)
	}
	e.wantVisible()
}

func testSweepLiveWriter(t *testing.T, e *env) {
	w := e.open(target1)
	e.write(w, hello)
	r := e.persist(w)
	if _, err := e.backend().Sweep(e.ctx, ns0, []json.RawMessage{r}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	e.write(w, world)
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, concat(hello, world))
}

func testSweepTwice(t *testing.T, e *env) {
	r := e.persisted(target1, hello)
	e.persisted(target2, world)
	for i := range 2 {
		if _, err := e.backend().Sweep(e.ctx, ns0, []json.RawMessage{r}); err != nil {
			t.Fatalf("Sweep #%d: %v", i+1, err)
		}
	}
	w := e.resume(r, int64(len(hello)))
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, hello)
	e.wantVisible(target1)
}

func testDescribe(t *testing.T, e *env) {
	w := e.open(target1)
	e.write(w, hello)
	r := e.persist(w)
	p := e.closeForCommit(w)
	for what, data := range map[string]json.RawMessage{"resumable": r, "pending": p} {
		target, staging, err := e.backend().Describe(data)
		if err != nil {
			t.Errorf("Describe(%s %s): %v", what, data, err)
			continue
		}
		if target != target1 {
			t.Errorf("Describe(%s): target %q, want %q", what, target, target1)
		}
		if staging == "" || staging == target1 {
			t.Errorf("Describe(%s): staging name %q, want a name other than the target", what, staging)
		}
	}
	_, rs, _ := e.backend().Describe(r)
	_, ps, _ := e.backend().Describe(p)
	if rs != ps {
		t.Errorf("Describe: staging %q of the resumable differs from staging %q of the pending of the same part", rs, ps)
	}
	for _, bad := range []string{`not json`, `{}`} {
		if _, _, err := e.backend().Describe(json.RawMessage(bad)); err == nil {
			t.Errorf("Describe(%s) succeeded, want an error", bad)
		}
	}
}

func testOutputCheck(t *testing.T, e *env) {
	a := e.backend()
	p := e.pending(target1, hello)
	if err := a.Check(e.ctx, p); !errors.Is(err, committer.ErrNotCommitted) {
		t.Errorf("Check of an uncommitted pending = %v; want an error matching committer.ErrNotCommitted", err)
	}
	e.commit(p)
	if err := a.Check(e.ctx, p); err != nil {
		t.Errorf("Check of a committed pending: %v", err)
	}
	tm, ok := e.h.Tamper()
	if !ok {
		return
	}
	if err := tm.DeleteTarget(e.ctx, target1); err != nil {
		t.Fatal(err)
	}
	if err := tm.PutTarget(e.ctx, target1, world); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(e.ctx, p); err == nil {
		t.Error("Check of a committed pending whose target has another length returned nil")
	}
	if err := tm.DeleteTarget(e.ctx, target1); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(e.ctx, p); err == nil {
		t.Error("Check of a committed pending whose target is gone returned nil")
	}
}

func testConcurrent(t *testing.T, e *env) {
	const n = 16
	b := e.backend()
	target := func(i int) string { return fmt.Sprintf("c%d/part-0-r1-%d.txt", i%4, i) }
	content := func(i int) []byte { return pattern(1000+i, 1000+i*37) }
	pendings := make([]json.RawMessage, n)
	err := runGroup(n, func(i int) error {
		w, err := b.Open(e.ctx, target(i))
		if err != nil {
			return err
		}
		c := content(i)
		if _, err := w.Write(c[:len(c)/2]); err != nil {
			return err
		}
		if _, err := w.Persist(e.ctx); err != nil {
			return err
		}
		if _, err := w.Write(c[len(c)/2:]); err != nil {
			return err
		}
		p, err := w.CloseForCommit(e.ctx)
		pendings[i] = p
		return err
	})
	if err != nil {
		t.Fatalf("concurrent Open/Write/CloseForCommit: %v", err)
	}
	e.wantVisible()

	// Every pending committed from its own goroutine while another
	// namespace is swept, then all of them again (idempotent), in reverse.
	err = runGroup(n+1, func(i int) error {
		if i == n {
			_, err := b.Sweep(e.ctx, "part-9-", nil)
			return err
		}
		return b.Commit(e.ctx, pendings[i])
	})
	if err != nil {
		t.Fatalf("concurrent Commit: %v", err)
	}
	err = runGroup(n, func(i int) error { return b.Commit(e.ctx, pendings[n-1-i]) })
	if err != nil {
		t.Fatalf("concurrent re-Commit: %v", err)
	}
	var want []string
	for i := range n {
		e.wantTarget(target(i), content(i))
		want = append(want, target(i))
	}
	e.wantVisible(want...)
}

// --- Power loss -----------------------------------------------------------

func testCrashAfterPersist(t *testing.T, e *env) {
	e.requireCrash()
	a, b := pattern(1, 333), pattern(2, 444)
	w := e.open(target1)
	e.write(w, a)
	r := e.persist(w)
	e.write(w, b)

	c := e.crash()
	c.wantVisible()
	w2 := c.resume(r, int64(len(a)))
	d := pattern(3, 5)
	c.write(w2, d)
	c.commit(c.closeForCommit(w2))
	c.wantTarget(target1, concat(a, d))
	c.wantVisible(target1)
	w.Close() // on the old store
}

func testCrashUnsyncedTail(t *testing.T, e *env) {
	e.requireCrash()
	a := pattern(1, 1000)
	w := e.open(target1)
	e.write(w, a[:400])
	e.persist(w)
	e.write(w, a[400:])
	r := e.persist(w)
	for i := range 5 {
		e.write(w, pattern(10+i, 97)) // never persisted
	}
	// Several independent power losses of the same state.
	for i := range 8 {
		c := e.crash()
		w2 := c.resume(r, int64(len(a)))
		c.commit(c.closeForCommit(w2))
		c.wantTarget(target1, a)
		c.wantVisible(target1)
		if t.Failed() {
			t.Fatalf("clone %d", i)
		}
	}
	w.Close()
}

func testCrashAfterCloseForCommit(t *testing.T, e *env) {
	e.requireCrash()
	a := pattern(1, 5000)
	w := e.open(target1)
	e.write(w, a[:10])
	e.persist(w)
	e.write(w, a[10:])
	p := e.closeForCommit(w)

	c := e.crash()
	c.wantVisible()
	c.commit(p)
	c.wantTarget(target1, a)
	c.wantVisible(target1)
}

func testCrashAfterCommit(t *testing.T, e *env) {
	e.requireCrash()
	a := pattern(1, 2048)
	p := e.publish(target1, a)
	e.publish(target2, hello)

	c := e.crash()
	// Commit returned nil: the publish must have survived the power loss
	// before anyone re-commits.
	c.wantTarget(target1, a)
	c.wantTarget(target2, hello)
	c.wantVisible(target1, target2)
	c.commit(p)
	c.wantTarget(target1, a)
	c.wantVisible(target1, target2)
}

func testCrashRecommitTwice(t *testing.T, e *env) {
	e.requireCrash()
	a := pattern(1, 700)
	p := e.pending(target1, a)
	c := e.crash()
	c.commit(p)
	c2 := c.crash()
	c2.commit(p)
	c2.wantTarget(target1, a)
	c3 := c2.crash()
	c3.commit(p)
	c3.wantTarget(target1, a)
	c3.wantVisible(target1)
}

func testCrashBeforePersist(t *testing.T, e *env) {
	e.requireCrash()
	w := e.open(target1)
	e.write(w, hello)
	c := e.crash()
	c.wantVisible()
	// Nothing was recorded: the orphan (if it survived) is swept and the
	// name can be used again.
	if _, err := c.backend().Sweep(c.ctx, ns0, nil); err != nil {
		t.Fatalf("Sweep after a power loss: %v", err)
	}
	c.publish(target1, world)
	c.wantTarget(target1, world)
	c.wantVisible(target1)
	w.Close()
}

func testCrashDuringResume(t *testing.T, e *env) {
	e.requireCrash()
	a, x, d := pattern(1, 64), pattern(2, 65), pattern(3, 66)
	w := e.open(target1)
	e.write(w, a)
	r := e.persist(w)
	e.write(w, x)

	// Recovery 1 resumes, writes, and loses power before its next Persist.
	c := e.crash()
	w1 := c.resume(r, int64(len(a)))
	c.write(w1, x, x)
	// Recovery 2 resumes from the same checkpoint.
	c2 := c.crash()
	w2 := c2.resume(r, int64(len(a)))
	c2.write(w2, d)
	p := c2.closeForCommit(w2)
	c3 := c2.crash()
	c3.commit(p)
	c3.wantTarget(target1, concat(a, d))
	w.Close()
	w1.Close()
}

func testCrashAfterSweep(t *testing.T, e *env) {
	e.requireCrash()
	r := e.persisted(target1, hello)
	p := e.pending("b2/part-0-r1-7.txt", world)
	e.persisted(target2, world) // orphan
	if _, err := e.backend().Sweep(e.ctx, ns0, []json.RawMessage{r, p}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	c := e.crash()
	c.wantVisible()
	w := c.resume(r, int64(len(hello)))
	c.commit(c.closeForCommit(w))
	c.commit(p)
	c.wantTarget(target1, hello)
	c.wantTarget("b2/part-0-r1-7.txt", world)
	c.wantVisible(target1, "b2/part-0-r1-7.txt")
}

// testFinalize: a part persisted and then written on by its writer (a
// process that lost it and does not know yet) is finalized by another:
// the published file holds exactly the recorded bytes. Finalizing the same
// resumable again (a crash before the first pending was recorded) gives a
// pending that publishes the same bytes; the first one, committed after
// it, finds them published.
func testFinalize(t *testing.T, e *env) {
	w := e.open(target1)
	e.write(w, hello)
	r := e.persist(w)
	e.write(w, world) // the other writer goes on
	first, err := e.backend().Finalize(e.ctx, r)
	if err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	again, err := e.h.Backend().Finalize(e.ctx, r)
	if err != nil {
		t.Fatalf("Finalize again: %v", err)
	}
	e.close(w)
	e.commit(again)
	e.wantTarget(target1, hello)
	e.wantVisible(target1)
	if err := e.h.Backend().Commit(e.ctx, first); err != nil {
		t.Fatalf("Commit of the first Finalize's pending after the second's: %v", err)
	}
	e.wantTarget(target1, hello)
}

// testFinalizeEmpty: a part persisted with no bytes is finalized into an
// empty file.
func testFinalizeEmpty(t *testing.T, e *env) {
	w := e.open(target1)
	r := e.persist(w)
	e.close(w)
	p, err := e.backend().Finalize(e.ctx, r)
	if err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	e.commit(p)
	e.wantTarget(target1, nil)
}
