package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"

	"github.com/filesink/filesink/committer/driver"
)

// Harness gives the suite a backend over one store and a reader's view of
// that store. Make a new one for every case with the function passed to
// [RunConformanceTests]; it must register its own cleanup with t.Cleanup.
// Its methods are called from one goroutine at a time, except Backend's
// result, which must be safe for concurrent use as the contract says.
type Harness interface {
	// Backend returns a backend over the harness's store. Every call must
	// return a backend over the same store; a second call stands for a new
	// process (a restart without a power loss).
	Backend() driver.Backend
	// ReadTarget returns the content of the finished (published) file or
	// object target, as a reader of the output would see it. A target that
	// does not exist must give an error matching fs.ErrNotExist.
	ReadTarget(ctx context.Context, target string) ([]byte, error)
	// Visible lists every finished target a reader of the output sees,
	// slash-separated and in any order. Staging data must not appear here
	// under any name; for a file system, that means files and directories
	// whose names start with '.' or '_' are skipped, as Hadoop, Spark and
	// Hive readers skip them.
	Visible(ctx context.Context) ([]string, error)
	// Crash returns a harness over what the store holds after a power loss
	// at this instant: what the backend made durable plus, possibly, part of
	// what it did not. The receiver stays usable and unchanged. A harness
	// that cannot simulate a power loss returns ok=false.
	Crash(t *testing.T) (h Harness, ok bool)
	// Tamper returns hooks that change the store behind the backend's back,
	// or ok=false if the harness has none.
	Tamper() (tm Tamperer, ok bool)
}

// Tamperer changes a store behind the backend's back, as an operator, a
// lifecycle rule or another program could. Every change must be visible to
// the backend's next call, durable, and made with the store's own client
// (not through the backend under test).
type Tamperer interface {
	// DeleteStaging deletes the staging data of a resumable or pending.
	DeleteStaging(ctx context.Context, data json.RawMessage) error
	// TruncateStaging shortens the staging data of a resumable or pending to
	// size bytes.
	TruncateStaging(ctx context.Context, data json.RawMessage, size int64) error
	// DeleteTarget deletes the finished target.
	DeleteTarget(ctx context.Context, target string) error
	// PutTarget creates (or replaces) the finished target with content, as a
	// foreign writer would.
	PutTarget(ctx context.Context, target string, content []byte) error
}

// NoCrash can be embedded in a Harness that cannot simulate a power loss.
type NoCrash struct{}

// Crash implements Harness: it reports that the capability is missing.
func (NoCrash) Crash(*testing.T) (Harness, bool) { return nil, false }

// NoTamper can be embedded in a Harness that has no tamper hooks.
type NoTamper struct{}

// Tamper implements Harness: it reports that the capability is missing.
func (NoTamper) Tamper() (Tamperer, bool) { return nil, false }

// RunConformanceTests runs every case against harnesses made by newHarness,
// each case a subtest with a fresh harness over an empty store.
func RunConformanceTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, &env{t: t, h: newHarness(t), ctx: t.Context()})
		})
	}
}

type testCase struct {
	name string
	fn   func(t *testing.T, e *env)
}

// cases is the suite, in the order it runs.
var cases = []testCase{
	// Publishing.
	{"Publish/ExactBytes", testPublishExactBytes},
	{"Publish/Empty", testPublishEmpty},
	{"Publish/Large", testPublishLarge},
	{"Publish/NestedAndTopLevel", testPublishNested},
	{"Publish/NothingVisibleBeforeCommit", testNothingVisibleBeforeCommit},
	{"Publish/CanceledContext", testCanceledContext},

	// Verified, idempotent, no-clobber Commit.
	{"Commit/Twice", testCommitTwice},
	{"Commit/AfterRestart", testCommitAfterRestart},
	{"Commit/StagingAndTargetMissing", testCommitBothMissing},
	{"Commit/StagingMissingBeforeFirstCommit", testCommitStagingMissingBeforeCommit},
	{"Commit/TargetOtherLength", testCommitTargetOtherLength},
	{"Commit/StagingShorter", testCommitStagingShorter},
	{"Commit/ForeignTargetOtherLength", testCommitForeignTargetOtherLength},
	{"Commit/ForeignTargetSameLength", testCommitForeignTargetSameLength},
	{"Commit/Malformed", testCommitMalformed},

	// Open.
	{"Open/TargetExists", testOpenTargetExists},
	{"Open/PublishedTarget", testOpenPublishedTarget},
	{"Open/StagingExists", testOpenStagingExists},
	{"Open/InvalidTargets", testOpenInvalidTargets},

	// Persist and Resume.
	{"Resume/DiscardsAfterPersist", testResumeDiscards},
	{"Resume/NothingWrittenAfter", testResumeNothingWritten},
	{"Resume/PersistWithoutWrites", testPersistWithoutWrites},
	{"Resume/OlderCheckpoint", testResumeOlderCheckpoint},
	{"Resume/TwiceFromSameCheckpoint", testResumeTwice},
	{"Resume/StagingShorter", testResumeStagingShorter},
	{"Resume/StagingMissing", testResumeStagingMissing},
	{"Resume/Malformed", testResumeMalformed},
	{"Resume/FromPersistAsync", testPersistAsync},
	{"Resume/ReleasedAndResumedAgain", testResumeReleased},

	// Staged data lost: the file sink rebuilds the part from the source
	// under the same target (filesink.WithReplayer).
	{"Rebuild/StagingRemovedBetweenCheckpointAndCommit", testRebuildBeforeCommit},
	{"Rebuild/StagingRemovedBetweenCheckpointAndResume", testRebuildBeforeResume},
	{"Rebuild/StagingShorter", testRebuildStagingShorter},
	{"Rebuild/TargetExists", testRebuildTargetExists},
	{"Finalize/RecordedBytesOnly", testFinalize},
	{"Finalize/Empty", testFinalizeEmpty},

	// Sweep.
	{"Sweep/OnlyOrphansOfNamespace", testSweep},
	{"Sweep/EmptyStore", testSweepEmpty},
	{"Sweep/LiveWriterInKeep", testSweepLiveWriter},
	{"Sweep/Twice", testSweepTwice},

	// Describe.
	{"Describe", testDescribe},

	// Output: audit, metadata, finished files.
	{"Output/Check", testOutputCheck},
	{"Output/MetaPutGetList", testMetaPutGetList},
	{"Output/FilesListOpen", testFilesListOpen},

	// Concurrency.
	{"Concurrent/OpenWriteCommit", testConcurrent},

	// Power loss (optional).
	{"Crash/AfterPersist", testCrashAfterPersist},
	{"Crash/UnsyncedTailNeverCorruptsPrefix", testCrashUnsyncedTail},
	{"Crash/AfterCloseForCommit", testCrashAfterCloseForCommit},
	{"Crash/AfterCommitDurable", testCrashAfterCommit},
	{"Crash/RecommitAcrossCrashes", testCrashRecommitTwice},
	{"Crash/BeforeFirstPersist", testCrashBeforePersist},
	{"Crash/DuringResumeTwice", testCrashDuringResume},
	{"Crash/AfterSweep", testCrashAfterSweep},
}

// env is one case's harness and helpers.
type env struct {
	t   *testing.T
	h   Harness
	ctx context.Context
	b   driver.Backend
}

func (e *env) backend() driver.Backend {
	if e.b == nil {
		e.b = e.h.Backend()
	}
	return e.b
}

// crash replaces the harness with its post-power-loss state, or skips.
func (e *env) crash() *env {
	e.t.Helper()
	h, ok := e.h.Crash(e.t)
	if !ok {
		e.t.Skip("harness lacks capability Crash (cannot simulate a power loss)")
	}
	return &env{t: e.t, h: h, ctx: e.ctx}
}

func (e *env) requireCrash() {
	e.t.Helper()
	// Probe once so that a harness without the capability skips before
	// doing any work.
	if _, ok := e.h.Crash(e.t); !ok {
		e.t.Skip("harness lacks capability Crash (cannot simulate a power loss)")
	}
}

func (e *env) tamper() Tamperer {
	e.t.Helper()
	tm, ok := e.h.Tamper()
	if !ok {
		e.t.Skip("harness lacks capability Tamper (cannot change the store behind the backend)")
	}
	return tm
}

func (e *env) open(target string) driver.PartWriter {
	e.t.Helper()
	w, err := e.backend().Open(e.ctx, target)
	if err != nil {
		e.t.Fatalf("Open(%q): %v", target, err)
	}
	if w.Size() != 0 {
		e.t.Fatalf("Open(%q): Size() = %d, want 0", target, w.Size())
	}
	return w
}

func (e *env) write(w driver.PartWriter, chunks ...[]byte) {
	e.t.Helper()
	for _, p := range chunks {
		before := w.Size()
		n, err := w.Write(p)
		if err != nil || n != len(p) {
			e.t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
		if got := w.Size(); got != before+int64(len(p)) {
			e.t.Fatalf("Size() after writing %d bytes to %d = %d, want %d", len(p), before, got, before+int64(len(p)))
		}
	}
}

func (e *env) persist(w driver.PartWriter) json.RawMessage {
	e.t.Helper()
	size := w.Size()
	r, err := w.Persist(e.ctx)
	if err != nil {
		e.t.Fatalf("Persist: %v", err)
	}
	if len(r) == 0 {
		e.t.Fatal("Persist returned an empty resumable")
	}
	if w.Size() != size {
		e.t.Fatalf("Size() changed across Persist: %d -> %d", size, w.Size())
	}
	return r
}

func (e *env) closeForCommit(w driver.PartWriter) json.RawMessage {
	e.t.Helper()
	p, err := w.CloseForCommit(e.ctx)
	if err != nil {
		e.t.Fatalf("CloseForCommit: %v", err)
	}
	if len(p) == 0 {
		e.t.Fatal("CloseForCommit returned an empty pending")
	}
	return p
}

func (e *env) close(w driver.PartWriter) {
	e.t.Helper()
	if err := w.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
}

func (e *env) commit(p json.RawMessage) {
	e.t.Helper()
	if err := e.backend().Commit(e.ctx, p); err != nil {
		e.t.Fatalf("Commit(%s): %v", p, err)
	}
}

func (e *env) resume(r json.RawMessage, wantSize int64) driver.PartWriter {
	e.t.Helper()
	w, err := e.backend().Resume(e.ctx, r)
	if err != nil {
		e.t.Fatalf("Resume(%s): %v", r, err)
	}
	if got := w.Size(); got != wantSize {
		w.Close()
		e.t.Fatalf("Resume(%s): Size() = %d, want the recorded %d", r, got, wantSize)
	}
	return w
}

// publish writes content to a new part target and commits it.
func (e *env) publish(target string, content []byte) json.RawMessage {
	e.t.Helper()
	w := e.open(target)
	e.write(w, content)
	p := e.closeForCommit(w)
	e.commit(p)
	return p
}

// wantTarget fails unless target holds exactly want.
func (e *env) wantTarget(target string, want []byte) {
	e.t.Helper()
	got, err := e.h.ReadTarget(e.ctx, target)
	if err != nil {
		e.t.Fatalf("ReadTarget(%q): %v", target, err)
	}
	if string(got) != string(want) {
		e.t.Fatalf("target %q holds %s, want %s", target, describeBytes(got), describeBytes(want))
	}
}

// wantNoTarget fails unless target does not exist.
func (e *env) wantNoTarget(target string) {
	e.t.Helper()
	got, err := e.h.ReadTarget(e.ctx, target)
	if err == nil {
		e.t.Fatalf("target %q exists (%s), want it missing", target, describeBytes(got))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		e.t.Fatalf("ReadTarget(%q) of a missing target: %v, want an error matching fs.ErrNotExist", target, err)
	}
}

// wantVisible fails unless the visible targets are exactly want.
func (e *env) wantVisible(want ...string) {
	e.t.Helper()
	got, err := e.h.Visible(e.ctx)
	if err != nil {
		e.t.Fatalf("Visible: %v", err)
	}
	got = slices.Clone(got)
	want = slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Fatalf("visible targets = %q, want %q", got, want)
	}
}

// wantErr fails unless err matches target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error matching %q", what, target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v; want an error matching %q", what, err, target)
	}
}

// describeBytes shows short contents verbatim and long ones by length and
// ends, so a failure message stays readable.
func describeBytes(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%d bytes %q...%q", len(b), b[:24], b[len(b)-24:])
}

// pattern returns n bytes that differ from those of any other seed, so that
// a shifted, repeated or mixed-up byte range is detected.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// runGroup runs fn(i) for i in [0, n) on n goroutines and returns every
// error, joined.
func runGroup(n int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			if err := fn(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
