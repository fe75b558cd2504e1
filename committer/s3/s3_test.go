package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
)

const mib = 1 << 20

// pattern returns n bytes that differ for every seed.
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

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// setup returns a harness over a fresh prefix and a backend with 5 MiB
// parts.
func setup(t *testing.T, opts ...Option) (*harness, *Backend) {
	t.Helper()
	srv := requireMinio(t)
	h := newHarness(t, srv, srv.NewBucket(t), append([]Option{WithPartSize(MinPartSize), WithSpillDir(t.TempDir())}, opts...)...)
	return h, h.backend()
}

func open(t *testing.T, b *Backend, target string) *writer {
	t.Helper()
	w, err := b.Open(t.Context(), target)
	if err != nil {
		t.Fatalf("Open(%s): %v", target, err)
	}
	return w.(*writer)
}

func write(t *testing.T, w driver.PartWriter, p ...[]byte) {
	t.Helper()
	for _, c := range p {
		if n, err := w.Write(c); err != nil || n != len(c) {
			t.Fatalf("Write(%d bytes) = %d, %v", len(c), n, err)
		}
	}
}

func persist(t *testing.T, w driver.PartWriter) (json.RawMessage, record) {
	t.Helper()
	r, err := w.Persist(t.Context())
	if err != nil {
		t.Fatalf("Persist: %v", err)
	}
	var rec record
	if err := json.Unmarshal(r, &rec); err != nil {
		t.Fatal(err)
	}
	return r, rec
}

func closeForCommit(t *testing.T, w driver.PartWriter) (json.RawMessage, record) {
	t.Helper()
	p, err := w.CloseForCommit(t.Context())
	if err != nil {
		t.Fatalf("CloseForCommit: %v", err)
	}
	var rec record
	if err := json.Unmarshal(p, &rec); err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func resume(t *testing.T, b *Backend, r json.RawMessage, size int64) *writer {
	t.Helper()
	w, err := b.Resume(t.Context(), r)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if w.Size() != size {
		t.Fatalf("Resume: Size() = %d, want %d", w.Size(), size)
	}
	return w.(*writer)
}

func (h *harness) wantTarget(t *testing.T, target string, want []byte) {
	t.Helper()
	got, err := h.ReadTarget(t.Context(), target)
	if err != nil {
		t.Fatalf("read %s: %v", target, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s holds %d bytes, want %d (equal prefix %d)", target, len(got), len(want), commonPrefix(got, want))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func (h *harness) exists(t *testing.T, key string) bool {
	t.Helper()
	_, err := h.client.HeadObject(t.Context(), &s3api.HeadObjectInput{Bucket: &h.bucket, Key: &key})
	if err != nil && !isNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestResumeAfterTail: a checkpoint with one full part and a tail object;
// the writer goes on (another part goes up) and dies; the resumed writer
// starts from the tail, and the part uploaded after the checkpoint is
// overwritten and never completed.
func TestResumeAfterTail(t *testing.T) {
	h, b := setup(t)
	a := pattern(1, 5*mib+1000)
	w := open(t, b, "d/part-0-r1-1.txt")
	write(t, w, a)
	r, rec := persist(t, w)
	if len(rec.Parts) != 1 || rec.BytesInParts != 5*mib || rec.TailLength != 1000 || len(rec.Tail) != 1 {
		t.Fatalf("resumable %s: want 1 part of 5 MiB and a 1000-byte tail", r)
	}
	if !h.exists(t, rec.Tail[0].Key) {
		t.Fatalf("tail object %s missing after Persist", rec.Tail[0].Key)
	}
	write(t, w, pattern(2, 6*mib)) // part 2 goes up, never recorded
	if err := w.waitParts(t.Context(), w.next-1); err != nil {
		t.Fatal(err)
	}
	w.Close()

	w = resume(t, b, r, int64(len(a)))
	c := pattern(3, 3*mib)
	write(t, w, c)
	p, prec := closeForCommit(t, w)
	if len(prec.Parts) != 2 || prec.Parts[1].Size != 1000+3*mib {
		t.Fatalf("pending %s: want 2 parts, the second of %d bytes", p, 1000+3*mib)
	}
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "d/part-0-r1-1.txt", cat(a, c))
	if !h.exists(t, rec.Tail[0].Key) {
		t.Error("the tail object was deleted by Resume or Commit; only the sweep may delete it")
	}
}

// TestSecondRestoreFromSameCheckpoint is FLINK-13940: restoring twice from
// one checkpoint must find the tail object the second time.
func TestSecondRestoreFromSameCheckpoint(t *testing.T) {
	h, b := setup(t)
	a, x, d := pattern(1, 4000), pattern(2, 6*mib), pattern(3, 100)
	w := open(t, b, "part-0-r1-1.txt")
	write(t, w, a)
	r, rec := persist(t, w)
	w.Close()

	// Restore 1: writes a full part and persists (a new tail), then dies.
	w = resume(t, b, r, int64(len(a)))
	write(t, w, x)
	_, rec1 := persist(t, w)
	if len(rec1.Tail) != 1 || rec1.Tail[0].Key == rec.Tail[0].Key || len(rec1.Parts) != 1 {
		t.Fatalf("second Persist reused tail %s or has %d parts", rec.Tail[0].Key, len(rec1.Parts))
	}
	w.Close()

	// Restore 2 from the same checkpoint.
	if !h.exists(t, rec.Tail[0].Key) {
		t.Fatalf("tail object %s of the checkpoint is gone after a restore (FLINK-13940)", rec.Tail[0].Key)
	}
	w = resume(t, b, r, int64(len(a)))
	write(t, w, d)
	p, _ := closeForCommit(t, w)
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "part-0-r1-1.txt", cat(a, d))
}

// TestCommitAfterCompletedElsewhere: the upload was completed with exactly
// the recorded parts (a Complete whose reply was lost); Commit verifies the
// object and succeeds. A completion with other parts is data loss.
func TestCommitAfterCompletedElsewhere(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		useParts int // parts to complete with; 0 = all recorded
		wantErr  error
	}{
		{"SameParts", 0, nil},
		{"FewerParts", 1, committer.ErrDataLoss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := "p/part-0-r1-" + tc.name + ".jsonl"
			data := pattern(7, 5*mib+10)
			w := open(t, b, target)
			write(t, w, data)
			p, rec := closeForCommit(t, w)
			parts := rec.Parts
			if tc.useParts > 0 {
				parts = parts[:tc.useParts]
			}
			var cps []s3types.CompletedPart
			for _, pr := range parts {
				cps = append(cps, s3types.CompletedPart{PartNumber: aws.Int32(pr.Number), ETag: aws.String(pr.ETag), ChecksumCRC32: aws.String(pr.CRC32)})
			}
			_, err := h.client.CompleteMultipartUpload(ctx, &s3api.CompleteMultipartUploadInput{
				Bucket: &h.bucket, Key: &rec.Key, UploadId: &rec.UploadID,
				MultipartUpload: &s3types.CompletedMultipartUpload{Parts: cps},
			})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				err = b.Commit(ctx, p)
				if tc.wantErr == nil && err != nil {
					t.Fatalf("Commit after the upload was completed with the recorded parts: %v", err)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Fatalf("Commit after the upload was completed with other parts: %v, want %v", err, tc.wantErr)
				}
			}
			if tc.wantErr == nil {
				h.wantTarget(t, target, data)
				if err := b.Check(ctx, p); err != nil {
					t.Errorf("Check: %v", err)
				}
			}
		})
	}
}

// TestUploadAbortedBySomeoneElse: Commit and Resume of an upload that a
// lifecycle rule aborted fail loudly, naming the key and the upload.
func TestUploadAbortedBySomeoneElse(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	w := open(t, b, "part-0-r1-1.txt")
	write(t, w, pattern(1, 100))
	r, rec := persist(t, w)
	write(t, w, pattern(2, 100))
	p, _ := closeForCommit(t, w)
	if _, err := h.client.AbortMultipartUpload(ctx, &s3api.AbortMultipartUploadInput{Bucket: &h.bucket, Key: &rec.Key, UploadId: &rec.UploadID}); err != nil {
		t.Fatal(err)
	}
	_, rerr := b.Resume(ctx, r)
	cerr := b.Commit(ctx, p)
	for what, err := range map[string]error{"Resume": rerr, "Commit": cerr} {
		var gone *UploadGoneError
		if !errors.Is(err, committer.ErrDataLoss) || !errors.As(err, &gone) {
			t.Errorf("%s of an aborted upload: %v; want an *UploadGoneError matching ErrDataLoss", what, err)
			continue
		}
		msg := err.Error()
		for _, want := range []string{rec.Key, rec.UploadID, "AbortIncompleteMultipartUpload", "makes it again from the source"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s error does not mention %q: %s", what, want, msg)
			}
		}
		if !committer.IsPermanent(err) {
			t.Errorf("%s error is retryable: %v", what, err)
		}
	}
	h.wantVisibleNone(t)
}

// TestUploadAbortedWhileWritten: an upload aborted while its writer
// uploads parts fails the writer with an *UploadGoneError that says what
// is lost: before any persist, nothing decided (running the job again
// writes the records again); after a persist, the records up to a decided
// checkpoint that recorded it, which the next run makes again from the
// source.
func TestUploadAbortedWhileWritten(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	for _, recorded := range []bool{false, true} {
		w := open(t, b, fmt.Sprintf("part-0-r1-%t.txt", recorded))
		if recorded {
			write(t, w, pattern(1, 100))
			persist(t, w)
		}
		if _, err := h.client.AbortMultipartUpload(ctx, &s3api.AbortMultipartUploadInput{Bucket: &h.bucket, Key: &w.rec.Key, UploadId: &w.rec.UploadID}); err != nil {
			t.Fatal(err)
		}
		var err error
		for i := 0; err == nil && i < 4; i++ { // a part upload fails, here or at the persist
			if _, err = w.Write(pattern(2, int(MinPartSize))); err == nil {
				_, err = w.Persist(ctx)
			}
		}
		var gone *UploadGoneError
		if !errors.As(err, &gone) || !errors.Is(err, committer.ErrDataLoss) || !gone.Writing || gone.Recorded != recorded {
			t.Fatalf("recorded %t: writing to an aborted upload: %v; want an *UploadGoneError while writing", recorded, err)
		}
		msg := err.Error()
		want := []string{"nothing that was decided is lost", "running the job again resumes from its last decided checkpoint"}
		if recorded {
			want = []string{"if one of them was decided", "makes it again from the source records its checkpoint lists", "only when the source no longer has them"}
		}
		for _, s := range want {
			if !strings.Contains(msg, s) {
				t.Errorf("recorded %t: the error does not say %q: %s", recorded, s, msg)
			}
		}
		w.Close()
	}
}

func (h *harness) wantVisibleNone(t *testing.T) {
	t.Helper()
	v, err := h.Visible(t.Context())
	if err != nil || len(v) != 0 {
		t.Fatalf("visible = %q, %v; want none", v, err)
	}
}

// TestForcedRoll: with at most 3 parts, MustRoll turns true when the third
// part is being filled; that part grows past the part size if written to.
func TestForcedRoll(t *testing.T) {
	h, b := setup(t, WithMaxParts(3))
	w := open(t, b, "part-0-r1-1.txt")
	a, c, d := pattern(1, 5*mib), pattern(2, 5*mib), pattern(3, 6*mib)
	write(t, w, a)
	if w.MustRoll() {
		t.Fatal("MustRoll after one part of three")
	}
	write(t, w, c)
	if !w.MustRoll() {
		t.Fatal("MustRoll is false while the last allowed part is being filled")
	}
	// Persist keeps the big tail as a tail object: no part may follow it.
	_, rec := persist(t, w)
	if len(rec.Parts) != 2 || rec.TailLength != 0 {
		t.Fatalf("resumable: %d parts, tail %d", len(rec.Parts), rec.TailLength)
	}
	write(t, w, d)
	_, rec = persist(t, w)
	if len(rec.Parts) != 2 || rec.TailLength != int64(len(d)) {
		t.Fatalf("resumable after writing to the last part: %d parts, tail %d; want 2 parts and a tail of %d", len(rec.Parts), rec.TailLength, len(d))
	}
	p, prec := closeForCommit(t, w)
	if len(prec.Parts) != 3 || prec.Parts[2].Size != int64(len(d)) {
		t.Fatalf("pending: %s", p)
	}
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "part-0-r1-1.txt", cat(a, c, d))
}

// TestPersistFlushesBigTailAsPart: a tail of at least MinPartSize becomes a
// part at Persist instead of a tail object.
func TestPersistFlushesBigTailAsPart(t *testing.T) {
	h, b := setup(t, WithPartSize(8*mib))
	w := open(t, b, "part-0-r1-1.txt")
	a, c := pattern(1, 6*mib), pattern(2, 3*mib)
	write(t, w, a)
	_, rec := persist(t, w)
	if len(rec.Parts) != 1 || rec.Parts[0].Size != 6*mib || len(rec.Tail) != 0 {
		t.Fatalf("resumable after 6 MiB with 8 MiB parts: %+v", rec)
	}
	write(t, w, c)
	_, rec = persist(t, w)
	if len(rec.Parts) != 1 || rec.TailLength != 3*mib {
		t.Fatalf("resumable: %+v", rec)
	}
	p, _ := closeForCommit(t, w)
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "part-0-r1-1.txt", cat(a, c))
}

// TestETagAndChecksum: the ETag and composite CRC-32 computed from the
// recorded parts are what the store reports.
func TestETagAndChecksum(t *testing.T) {
	h, b := setup(t)
	for i, n := range []int{0, 10, 5 * mib, 11*mib + 3} {
		target := "e/part-0-r1-" + string(rune('a'+i))
		w := open(t, b, target)
		write(t, w, pattern(i, n))
		p, rec := closeForCommit(t, w)
		if err := b.Commit(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		head, err := h.client.HeadObject(t.Context(), &s3api.HeadObjectInput{Bucket: &h.bucket, Key: &rec.Key, ChecksumMode: s3types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		etag, _ := multipartETag(rec.Parts)
		crc, _ := compositeCRC32(rec.Parts)
		if got := unquote(aws.ToString(head.ETag)); got != etag {
			t.Errorf("%d bytes: ETag %s, computed %s", n, got, etag)
		}
		if got := aws.ToString(head.ChecksumCRC32); got != crc {
			t.Errorf("%d bytes: CRC-32 %s, computed %s", n, got, crc)
		}
		if head.Metadata[metaID] != rec.ID {
			t.Errorf("%d bytes: metadata %v, want id %s", n, head.Metadata, rec.ID)
		}
	}
}

// TestSweepOwnsItsMess: Sweep aborts only this namespace's unreferenced
// uploads and deletes only its unreferenced tails and markers.
func TestSweepOwnsItsMess(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	const ns = "part-0-"

	// An orphan: persisted twice (two tails), closed, not kept.
	w := open(t, b, "b/part-0-r1-1.txt")
	write(t, w, pattern(1, 10))
	_, orphan1 := persist(t, w)
	write(t, w, pattern(2, 10))
	_, orphan2 := persist(t, w)
	w.Close()

	// A kept resumable whose deltas were merged into one tail object: the
	// deltas are referenced by no kept resumable.
	w = open(t, b, "b/part-0-r1-2.txt")
	var old record
	deltas := w.deltaLimit
	for i := range deltas {
		write(t, w, pattern(3+i, 1))
		_, old = persist(t, w)
	}
	write(t, w, pattern(4, 4))
	keptR, kept := persist(t, w)
	if len(old.Tail) != deltas || len(kept.Tail) != 1 || kept.TailLength != int64(deltas)+4 {
		t.Fatalf("tail objects: %d then %d (%d bytes); want %d merged into 1", len(old.Tail), len(kept.Tail), kept.TailLength, deltas)
	}
	w.Close()

	// A kept pending.
	w = open(t, b, "b/part-0-r1-3.txt")
	write(t, w, pattern(5, 10))
	keptP, _ := closeForCommit(t, w)

	// A marker whose Create never happened (crash between the two).
	markerOnly := h.key(StagingName("b/part-0-r1-4.txt")) + markerSuffix
	if _, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: &markerOnly, Body: strings.NewReader("{}")}); err != nil {
		t.Fatal(err)
	}
	// A second upload of the kept resumable's key (an in-doubt Create).
	dup, err := h.client.CreateMultipartUpload(ctx, &s3api.CreateMultipartUploadInput{Bucket: &h.bucket, Key: aws.String(kept.Key)})
	if err != nil {
		t.Fatal(err)
	}

	// Others' staging data: subtask 1, subtask 10, another prefix, a
	// foreign upload and object under the prefix.
	var others []record
	for _, tg := range []string{"b/part-1-r1-1.txt", "b/part-10-r1-1.txt", "b/other-0-r1-1.txt"} {
		w := open(t, b, tg)
		write(t, w, pattern(6, 10))
		_, r := persist(t, w)
		w.Close()
		others = append(others, r)
	}
	foreignKey := h.key("b/foreign.bin")
	foreign, err := h.client.CreateMultipartUpload(ctx, &s3api.CreateMultipartUploadInput{Bucket: &h.bucket, Key: &foreignKey})
	if err != nil {
		t.Fatal(err)
	}
	strange := h.key(StagingDir + "/README")
	if _, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: &strange, Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	// A published part of the namespace.
	w = open(t, b, "b/part-0-r1-5.txt")
	write(t, w, pattern(7, 10))
	pub, _ := closeForCommit(t, w)
	if err := b.Commit(ctx, pub); err != nil {
		t.Fatal(err)
	}

	before, err := b.ListUploads(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 4 { // orphan, kept resumable + its duplicate, kept pending
		t.Fatalf("ListUploads(%q) before the sweep = %+v, want 4 uploads", ns, before)
	}
	var swept []map[string]int64
	for range 2 {
		n, err := b.Sweep(ctx, ns, []json.RawMessage{keptR, keptP})
		if err != nil {
			t.Fatal(err)
		}
		swept = append(swept, n)
	}
	after, err := b.ListUploads(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range after {
		ids = append(ids, u.UploadID)
	}
	slices.Sort(ids)
	var keptPending record
	json.Unmarshal(keptP, &keptPending)
	want := []string{kept.UploadID, keptPending.UploadID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("uploads after the sweep = %q, want the kept ones %q", ids, want)
	}
	wantKeys := map[string]bool{
		orphan1.Tail[0].Key: false, orphan2.Tail[1].Key: false, h.key(StagingName("b/part-0-r1-1.txt")) + markerSuffix: false,
		kept.Tail[0].Key: true, h.key(StagingName("b/part-0-r1-2.txt")) + markerSuffix: true,
		h.key(StagingName("b/part-0-r1-3.txt")) + markerSuffix: true,
		markerOnly: false, strange: true, h.key("b/part-0-r1-5.txt"): true,
	}
	for _, tr := range old.Tail {
		wantKeys[tr.Key] = false
	}
	deleted := int64(0)
	for _, exists := range wantKeys {
		if !exists {
			deleted++
		}
	}
	// The orphan's upload and the kept key's duplicate, and every staging
	// object gone; nothing the second time.
	if n := swept[0]; n[driver.SweptUpload] != 2 || n[driver.SweptStagingObject] != deleted {
		t.Errorf("first sweep counted %v, want 2 uploads and %d staging objects", n, deleted)
	}
	if n := swept[1]; n[driver.SweptUpload] != 0 || n[driver.SweptStagingObject] != 0 {
		t.Errorf("second sweep counted %v, want nothing", n)
	}
	for key, wantExists := range wantKeys {
		if got := h.exists(t, key); got != wantExists {
			t.Errorf("%s exists = %v after the sweep, want %v", key, got, wantExists)
		}
	}
	if _, err := h.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &h.bucket, Key: aws.String(kept.Key), UploadId: dup.UploadId}); !isNoSuchUpload(err) {
		t.Errorf("the duplicate upload of a kept key was not aborted: %v", err)
	}
	for _, r := range others {
		if !h.exists(t, r.Tail[0].Key) {
			t.Errorf("tail %s of another namespace was deleted", r.Tail[0].Key)
		}
		if _, err := h.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &h.bucket, Key: &r.Key, UploadId: &r.UploadID}); err != nil {
			t.Errorf("upload of %s (another namespace) is gone: %v", r.Target, err)
		}
	}
	if _, err := h.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &h.bucket, Key: &foreignKey, UploadId: foreign.UploadId}); err != nil {
		t.Errorf("foreign upload is gone: %v", err)
	}
	// The kept ones still work.
	w = resume(t, b, keptR, int64(deltas)+4)
	p, _ := closeForCommit(t, w)
	for _, c := range []json.RawMessage{p, keptP} {
		if err := b.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListAndAbortUploads exercises the helpers of `filesink uploads`.
func TestListAndAbortUploads(t *testing.T) {
	_, b := setup(t)
	ctx := t.Context()
	w1 := open(t, b, "x/part-0-r1-1.txt")
	w2 := open(t, b, "part-0-r1-2.txt")
	w3 := open(t, b, "part-1-r1-1.txt")
	defer w1.Close()
	defer w2.Close()
	defer w3.Close()
	ups, err := b.ListUploads(ctx, "part-0-")
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 2 || ups[0].UploadID != w2.rec.UploadID || ups[1].Target != "x/part-0-r1-1.txt" {
		t.Fatalf("ListUploads = %+v", ups)
	}
	if err := b.AbortUpload(ctx, ups[0].Key, ups[0].UploadID); err != nil {
		t.Fatal(err)
	}
	if err := b.AbortUpload(ctx, ups[0].Key, ups[0].UploadID); err != nil {
		t.Fatalf("second abort: %v", err)
	}
	if err := b.AbortUpload(ctx, "elsewhere/k", "id"); err == nil {
		t.Error("AbortUpload of a key outside the prefix succeeded")
	}
	all, err := b.ListUploads(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("ListUploads(\"\") after an abort = %+v", all)
	}
	// Writing to the aborted upload fails loudly.
	write(t, w2, pattern(1, 10))
	if _, err := w2.CloseForCommit(ctx); !errors.Is(err, committer.ErrDataLoss) {
		t.Fatalf("CloseForCommit of an aborted upload: %v", err)
	}
}

// TestListTailsAndStaged: ListTails lists the tail objects of a namespace,
// and Staged names the upload and tail objects a resumable or committable
// references.
func TestListTailsAndStaged(t *testing.T) {
	_, b := setup(t)
	ctx := t.Context()
	w := open(t, b, "d/part-0-r1-1.txt")
	defer w.Close()
	write(t, w, pattern(1, 10))
	r1, rec1 := persist(t, w)
	write(t, w, pattern(2, 10))
	r2, rec2 := persist(t, w)
	other := open(t, b, "part-1-r1-1.txt")
	defer other.Close()
	write(t, other, pattern(3, 10))
	persist(t, other)
	tails, err := b.ListTails(ctx, "part-0-")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tr := range append(rec1.Tail, rec2.Tail...) {
		if !slices.Contains(want, tr.Key) {
			want = append(want, tr.Key)
		}
	}
	slices.Sort(want)
	var got []string
	for _, tl := range tails {
		got = append(got, tl.Key)
		if tl.Target != "d/part-0-r1-1.txt" {
			t.Errorf("tail %s: target %q", tl.Key, tl.Target)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListTails(part-0-) = %q, want %q", got, want)
	}
	for _, r := range []struct {
		data json.RawMessage
		rec  record
	}{{r1, rec1}, {r2, rec2}} {
		st, err := b.Staged(r.data)
		if err != nil {
			t.Fatal(err)
		}
		if st.UploadID != r.rec.UploadID || st.Key != r.rec.Key || st.Target != "d/part-0-r1-1.txt" || len(st.Tails) != len(r.rec.Tail) || st.Tails[0] != r.rec.Tail[0].Key {
			t.Errorf("Staged(%s) = %+v", r.data, st)
		}
	}
	elsewhere, err := New(b.client, b.bucket, "another-prefix")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := elsewhere.Staged(r1); err == nil {
		t.Error("Staged of another prefix's resumable succeeded")
	}
}

// TestScan: staging names as Describe gives them, and staging data in the
// visible output reported.
func TestScan(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	w := open(t, b, "d/part-0-r1-1.txt")
	write(t, w, pattern(1, 10))
	r, _ := persist(t, w)
	w.Close()
	_, wantStaging, _ := b.Describe(r)
	bad := h.key("d/.part-0-r1-1.txt.tail-0123456789abcdef")
	if _, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: &bad, Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	staging, problems, err := b.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(staging, []string{wantStaging}) {
		t.Errorf("Scan staging = %q, want %q", staging, wantStaging)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], bad) {
		t.Errorf("Scan problems = %q, want one naming %s", problems, bad)
	}
}

// TestObjectAttributes: content type from the extension without
// Content-Encoding, tags, and explicit overrides.
func TestObjectAttributes(t *testing.T) {
	h, b := setup(t, WithTags(map[string]string{"team": "data", "sink": "a b"}))
	ctx := t.Context()
	publish := func(b *Backend, target string) {
		w := open(t, b, target)
		write(t, w, []byte("x"))
		p, _ := closeForCommit(t, w)
		if err := b.Commit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	publish(b, "part-0-r1-1.jsonl.gz")
	publish(b, "part-0-r1-2.csv")
	b2 := h.backend(WithContentType("application/x-custom"), WithContentEncoding("identity"))
	publish(b2, "part-0-r1-3.jsonl")
	for target, want := range map[string][2]string{
		"part-0-r1-1.jsonl.gz": {"application/gzip", ""},
		"part-0-r1-2.csv":      {"text/csv; charset=utf-8", ""},
		"part-0-r1-3.jsonl":    {"application/x-custom", "identity"},
	} {
		head, err := h.client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &h.bucket, Key: aws.String(h.key(target))})
		if err != nil {
			t.Fatal(err)
		}
		if ct, ce := aws.ToString(head.ContentType), aws.ToString(head.ContentEncoding); ct != want[0] || ce != want[1] {
			t.Errorf("%s: Content-Type %q Content-Encoding %q, want %q %q", target, ct, ce, want[0], want[1])
		}
	}
	tags, err := h.client.GetObjectTagging(ctx, &s3api.GetObjectTaggingInput{Bucket: &h.bucket, Key: aws.String(h.key("part-0-r1-1.jsonl.gz"))})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tg := range tags.TagSet {
		got[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if got["team"] != "data" || got["sink"] != "a b" || len(got) != 2 {
		t.Errorf("tags = %v", got)
	}
}

func TestInvalidOptions(t *testing.T) {
	c := s3api.New(s3api.Options{Region: "us-east-1"})
	for name, opts := range map[string][]Option{
		"small parts":   {WithPartSize(MinPartSize - 1)},
		"huge parts":    {WithPartSize(MaxPartSize + 1)},
		"concurrency":   {WithConcurrency(0)},
		"max parts":     {WithMaxParts(MaxParts + 1)},
		"spill dir":     {WithSpillDir("/nonexistent/dir")},
		"integrity":     {WithIntegrity(Integrity(7))},
		"storage class": {WithStorageClass("standard ia")},
		"tags":          {WithTags(map[string]string{"aws:x": "y"})},
		"content type":  {WithContentType("")},
		"logger":        {WithLogger(nil)},
	} {
		if _, err := New(c, "bucket", "p", opts...); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	// Errors are reported together.
	_, err := New(c, "bucket", "p", WithPartSize(1), WithConcurrency(0))
	if err == nil || !strings.Contains(err.Error(), "part size") || !strings.Contains(err.Error(), "concurrency") {
		t.Errorf("New with two bad options: %v; want both named", err)
	}
	for _, p := range []string{"a//b", "a/../b", "./a"} {
		if _, err := New(c, "bucket", p); err == nil {
			t.Errorf("New with prefix %q succeeded", p)
		}
	}
	if _, err := New(c, "", "p"); err == nil {
		t.Error("New with an empty bucket succeeded")
	}
	if b, err := New(c, "bucket", "/a/b/"); err != nil || b.key("t") != "a/b/t" {
		t.Errorf("prefix /a/b/: %v", err)
	}
	if b, err := New(c, "bucket", ""); err != nil || b.key("t") != "t" || b.markerKey("d/t") != "_filesink-staging/d/.t.upload" {
		t.Errorf("empty prefix: %v", err)
	}
}

// TestConcurrencyBound: a writer never runs more part uploads at once than
// configured, and Write blocks instead of buffering more parts.
func TestConcurrencyBound(t *testing.T) {
	srv := requireMinio(t)
	var inFlight, peak atomic.Int64
	client := s3api.New(s3api.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey(), srv.SecretKey(), ""),
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			part := r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != ""
			if part {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
			}
			return http.DefaultTransport.RoundTrip(r)
		})},
	})
	bucket := srv.NewBucket(t)
	b, err := New(client, bucket, "c", WithPartSize(MinPartSize), WithConcurrency(2), WithSpillDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, b, "part-0-r1-1.txt")
	data := pattern(1, 6*MinPartSize+5)
	for i := 0; i < len(data); i += 1 << 20 {
		write(t, w, data[i:min(i+1<<20, len(data))])
	}
	p, rec := closeForCommit(t, w)
	if len(rec.Parts) != 7 {
		t.Fatalf("%d parts, want 7", len(rec.Parts))
	}
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if pk := peak.Load(); pk > 2 || pk < 1 {
		t.Errorf("peak concurrent part uploads = %d, want 1..2", pk)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestIntegrityModes checks the payload signing and checksum headers of
// each mode against a fake server over plain HTTP and over TLS.
func TestIntegrityModes(t *testing.T) {
	type seen struct{ sha, crc string }
	for _, tc := range []struct {
		mode    Integrity
		tls     bool
		wantSHA func(string) bool
	}{
		{IntegrityDefault, false, func(s string) bool { return len(s) == 64 }},
		{IntegrityFast, false, func(s string) bool { return len(s) == 64 }}, // never unsigned over plain HTTP
		{IntegrityFast, true, func(s string) bool { return s == "UNSIGNED-PAYLOAD" }},
	} {
		var mu sync.Mutex
		var got []seen
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, seen{r.Header.Get("X-Amz-Content-Sha256"), r.Header.Get("X-Amz-Checksum-Crc32")})
			mu.Unlock()
			w.Header().Set("ETag", `"d41d8cd98f00b204e9800998ecf8427e"`)
			if r.Method == http.MethodGet {
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>`))
			}
		})
		var srv *httptest.Server
		if tc.tls {
			srv = httptest.NewTLSServer(handler)
		} else {
			srv = httptest.NewServer(handler)
		}
		o := defaultOptions()
		o.integrity = tc.mode
		if err := o.validate(); err != nil {
			t.Fatal(err)
		}
		client := s3api.New(s3api.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, HTTPClient: srv.Client(),
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		})
		ctx := context.Background()
		body := []byte("0123456789")
		if _, err := client.PutObject(ctx, &s3api.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: bytes.NewReader(body), ChecksumCRC32: crcBase64(0xa684c7c6)}, o.apply); err != nil {
			t.Fatalf("%v tls=%v: PutObject: %v", tc.mode, tc.tls, err)
		}
		if _, err := client.ListObjectsV2(ctx, &s3api.ListObjectsV2Input{Bucket: aws.String("b")}, o.apply); err != nil {
			t.Fatalf("%v tls=%v: ListObjectsV2: %v", tc.mode, tc.tls, err)
		}
		srv.Close()
		if len(got) != 2 {
			t.Fatalf("%v tls=%v: %d requests", tc.mode, tc.tls, len(got))
		}
		for i, s := range got {
			if !tc.wantSHA(s.sha) {
				t.Errorf("%v tls=%v: request %d signed payload %q", tc.mode, tc.tls, i, s.sha)
			}
		}
		if got[0].crc != *crcBase64(0xa684c7c6) {
			t.Errorf("%v tls=%v: part checksum header %q, want ours", tc.mode, tc.tls, got[0].crc)
		}
	}
}

// TestNewClient: the standard chain (environment) with AWS_ENDPOINT_URL,
// both integrity modes, and no credentials in errors.
func TestNewClient(t *testing.T) {
	srv := requireMinio(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey())
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint())
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	for _, mode := range []Integrity{IntegrityDefault, IntegrityFast} {
		c, err := NewClient(t.Context(), WithPathStyle(), WithIntegrity(mode))
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(c, bucket, mode.String(), WithIntegrity(mode), WithSpillDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		w, err := b.Open(t.Context(), "part-0-r1-1.txt")
		if err != nil {
			t.Fatalf("%v: Open: %v", mode, err)
		}
		write(t, w, pattern(1, 6*mib))
		p, _ := closeForCommit(t, w)
		if err := b.Commit(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	// Wrong secret: the error names the problem, never the secret.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
	c, err := NewClient(t.Context(), WithPathStyle(), WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(c, bucket, "x")
	_, err = b.Open(t.Context(), "part-0-r1-1.txt")
	if err == nil || strings.Contains(err.Error(), "wrong-secret-value") || strings.Contains(err.Error(), srv.SecretKey()) {
		t.Errorf("Open with a wrong secret: %v", err)
	}
	if _, err := NewClient(t.Context(), WithEndpoint("http://user:hunter2@host")); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("NewClient with credentials in the endpoint: %v", err)
	}
	if _, err := NewClient(t.Context(), WithEndpoint("ftp://x")); err == nil {
		t.Error("NewClient accepted an ftp endpoint")
	}
}

// TestTailObjects: each Persist stores only the bytes written since the
// last one; resuming reads them all back in order and checks their CRC-32.
func TestTailObjects(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	a, c, d := pattern(1, 1000), pattern(2, 2000), pattern(3, 3000)
	w := open(t, b, "part-0-r1-1.txt")
	write(t, w, a)
	r1, rec1 := persist(t, w)
	write(t, w, c)
	r2, rec2 := persist(t, w)
	r3, rec3 := persist(t, w)
	w.Close()
	if len(rec1.Tail) != 1 || len(rec2.Tail) != 2 || rec2.Tail[0] != rec1.Tail[0] || rec2.Tail[1].Length != int64(len(c)) {
		t.Fatalf("tails: %+v then %+v", rec1.Tail, rec2.Tail)
	}
	if !slices.Equal(rec3.Tail, rec2.Tail) {
		t.Fatalf("a Persist with nothing written wrote a tail object: %+v", rec3.Tail)
	}
	w = resume(t, b, r1, int64(len(a)))
	w.Close()
	w = resume(t, b, r3, int64(len(a)+len(c)))
	w.Close()
	// A tail object with other bytes of the same length is data loss.
	bad := bytes.Clone(c)
	bad[7] ^= 1
	if _, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: &rec2.Tail[1].Key, Body: bytes.NewReader(bad)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resume(ctx, r2); !errors.Is(err, committer.ErrDataLoss) || !strings.Contains(err.Error(), "CRC-32") {
		t.Fatalf("Resume over a changed tail object: %v", err)
	}
	if _, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: &rec2.Tail[1].Key, Body: bytes.NewReader(c)}); err != nil {
		t.Fatal(err)
	}
	w = resume(t, b, r2, int64(len(a)+len(c)))
	write(t, w, d)
	p, _ := closeForCommit(t, w)
	if err := b.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "part-0-r1-1.txt", cat(a, c, d))
}

// TestNoConditionalWrites: on a store that rejects If-None-Match as not
// implemented, Open, Commit and the Store fall back to HEAD-then-write, and
// a foreign target is still never overwritten.
func TestNoConditionalWrites(t *testing.T) {
	srv := requireMinio(t)
	var rejected atomic.Int64
	client := srv.Client(t, withRetryer, func(o *s3api.Options) {
		o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("If-None-Match") != "" {
				rejected.Add(1)
				body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>`
				return &http.Response{StatusCode: http.StatusNotImplemented, Status: "501 Not Implemented", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
					Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
			}
			return http.DefaultTransport.RoundTrip(r)
		})}
	})
	bucket := srv.NewBucket(t)
	h := &harness{t: t, client: srv.Client(t, withRetryer), bucket: bucket, prefix: "nc", opts: []Option{WithSpillDir(t.TempDir())}}
	b, err := New(client, bucket, "nc", WithSpillDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w := open(t, b, "part-0-r1-1.txt")
	write(t, w, []byte("hello"))
	p, _ := closeForCommit(t, w)
	if _, err := b.Open(ctx, "part-0-r1-1.txt"); !errors.Is(err, committer.ErrAlreadyExists) {
		t.Errorf("second Open without conditional writes: %v", err)
	}
	if err := h.PutTarget(ctx, "part-0-r1-1.txt", []byte("foreign")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, p); !errors.Is(err, committer.ErrAlreadyExists) {
		t.Fatalf("Commit over a foreign object: %v", err)
	}
	h.wantTarget(t, "part-0-r1-1.txt", []byte("foreign"))
	if err := h.DeleteTarget(ctx, "part-0-r1-1.txt"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.Commit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	h.wantTarget(t, "part-0-r1-1.txt", []byte("hello"))
	s := MustNewStore(t, client, bucket, "nc/_filesink")
	if err := s.Put(ctx, sampleCheckpoint(1)); err != nil {
		t.Fatal(err)
	}
	c := sampleCheckpoint(1)
	c.Source = json.RawMessage(`{"other":1}`)
	if err := s.Put(ctx, c); err == nil {
		t.Error("Store.Put overwrote a record without conditional writes")
	}
	if got, err := s.Get(ctx, 1); err != nil || string(got.Source) != `{"offset":42}` {
		t.Errorf("record 1 = %v, %v", got, err)
	}
	if rejected.Load() == 0 {
		t.Fatal("no conditional request was sent")
	}
}

// TestPersistAsyncOverlapsWrites: the bytes written after PersistAsync
// returns (including a whole part that goes up meanwhile, and a close for
// commit before the wait) are not in the resumable; resuming from it gives
// exactly the barrier's bytes.
func TestPersistAsyncOverlapsWrites(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	a, more, c := pattern(1, 5*mib+1000), pattern(2, 6*mib), pattern(3, 3000)
	w := open(t, b, "async/part-0-r1-1.txt")
	write(t, w, a)
	wait, err := w.PersistAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   json.RawMessage
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := wait(ctx)
		done <- result{r, err}
	}()
	write(t, w, more) // part 2 fills and goes up beside the wait
	pending, _ := closeForCommit(t, w)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	var rec record
	if err := json.Unmarshal(res.r, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Length != int64(len(a)) || len(rec.Parts) != 1 || rec.TailLength != 1000 || len(rec.Tail) != 1 || rec.Tail[0].CRC32 == "" {
		t.Fatalf("resumable %s: want the %d bytes of the barrier: 1 part and a 1000-byte tail with its CRC", res.r, len(a))
	}
	// The upload now holds parts 1-3 (the close uploaded the rest); a
	// restore from the resumable continues at part 2 and completes without
	// the bytes written after the barrier.
	w = resume(t, b, res.r, int64(len(a)))
	write(t, w, c)
	p, prec := closeForCommit(t, w)
	if len(prec.Parts) != 2 {
		t.Fatalf("pending after resume lists %d parts, want 2", len(prec.Parts))
	}
	if err := b.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "async/part-0-r1-1.txt", cat(a, c))
	// The pending of the first writer names parts that were overwritten by
	// the resumed writer: committing it now is not silently accepted.
	if err := b.Commit(ctx, pending); err == nil {
		t.Fatal("Commit of the superseded pending succeeded")
	}
}

// TestTailPolicy: many persists of small amounts keep the resumable within
// maxTailObjects (deltas merged, merges consolidated), every resumable
// resumes to its exact bytes, and the bytes re-sent stay a small multiple
// of the bytes written.
func TestTailPolicy(t *testing.T) {
	_, b := setup(t)
	w := open(t, b, "policy/part-0-r1-1.txt")
	var all []byte
	var resumables []json.RawMessage
	var sent int64
	var prev record
	maxSeen := 0
	for i := range 200 {
		chunk := pattern(10+i, 1000+i)
		write(t, w, chunk)
		all = append(all, chunk...)
		r, rec := persist(t, w)
		if rec.TailLength != int64(len(all)) {
			t.Fatalf("persist %d: tail holds %d bytes, want %d", i, rec.TailLength, len(all))
		}
		for _, tr := range rec.Tail {
			if !slices.Contains(prev.Tail, tr) {
				sent += tr.Length
			}
		}
		maxSeen = max(maxSeen, len(rec.Tail))
		prev = rec
		if i%37 == 0 || i == 199 {
			resumables = append(resumables, r)
		}
	}
	w.Close()
	if maxSeen > maxTailObjects {
		t.Fatalf("a resumable listed %d tail objects, limit %d", maxSeen, maxTailObjects)
	}
	if maxSeen <= minDeltas {
		t.Fatalf("at most %d tail objects in 200 persists: deltas were never kept", maxSeen)
	}
	if sent > 4*int64(len(all)) {
		t.Fatalf("%d tail bytes sent for %d bytes written", sent, len(all))
	}
	for _, r := range resumables {
		var rec record
		if err := json.Unmarshal(r, &rec); err != nil {
			t.Fatal(err)
		}
		w := resume(t, b, r, rec.Length)
		w.Close()
	}
}

// TestTailPolicyAcrossResumes: a writer closed and resumed after every
// persist (the file sink's open-file limit releases parts so) keeps its
// resumables within maxTailObjects, and the last one resumes to every
// byte.
func TestTailPolicyAcrossResumes(t *testing.T) {
	h, b := setup(t)
	w := open(t, b, "policy/part-0-r1-2.txt")
	var all []byte
	maxSeen := 0
	for i := range 120 {
		chunk := pattern(10+i, 1000+i)
		write(t, w, chunk)
		all = append(all, chunk...)
		r, rec := persist(t, w)
		maxSeen = max(maxSeen, len(rec.Tail))
		w.Close()
		w = resume(t, b, r, int64(len(all)))
	}
	p, _ := closeForCommit(t, w)
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "policy/part-0-r1-2.txt", all)
	if maxSeen > maxTailObjects {
		t.Fatalf("a resumable listed %d tail objects, limit %d", maxSeen, maxTailObjects)
	}
}

// TestOpenExistingLeavesNoMarker: Open writes the upload marker while it
// checks that the target does not exist; when the target exists, the Open
// fails with ErrAlreadyExists and the marker it wrote is deleted again.
func TestOpenExistingLeavesNoMarker(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	const target = "part-0-r1-1.txt"
	if err := h.PutTarget(ctx, target, []byte("there")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, target); !errors.Is(err, committer.ErrAlreadyExists) {
		t.Fatalf("Open of an existing target: %v, want ErrAlreadyExists", err)
	}
	if h.exists(t, b.markerKey(target)) {
		t.Error("the upload marker of the failed Open is left behind")
	}
	h.wantTarget(t, target, []byte("there"))
	// A target that does not exist still opens, with its marker.
	w := open(t, b, "part-0-r1-2.txt")
	if !h.exists(t, b.markerKey("part-0-r1-2.txt")) {
		t.Error("no upload marker for an open part file")
	}
	w.Close()
}

// TestNewClientSDKMessagesToLogger: the SDK's own messages (reading a
// multipart object back with checksum validation on, it notes that it
// skips the composite checksum) go to the WithLogger logger at debug
// level, not to stderr.
func TestNewClientSDKMessagesToLogger(t *testing.T) {
	srv := requireMinio(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey())
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := NewClient(t.Context(), WithEndpoint(srv.Endpoint()), WithRegion(srv.Region()), WithPathStyle(), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(c, bucket, "p", WithSpillDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Open(t.Context(), "part-0-r1-1.txt")
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, pattern(1, 6*mib))
	p, _ := closeForCommit(t, w)
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetObject(t.Context(), &s3api.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("p/part-0-r1-1.txt"),
		ChecksumMode: s3types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, out.Body)
	out.Body.Close()
	text := logged.String()
	if !strings.Contains(text, "level=DEBUG") || !strings.Contains(text, "aws sdk: ") || strings.Contains(text, " level=WARN") {
		t.Errorf("want the SDK's note at debug level in the log, got:\n%s", text)
	}
}

// TestFinalizeWhileTheOtherWriterGoesOn: a part file of whole parts and
// tail objects is finalized by a new owner while its writer, which lost
// it, goes on: uploads more parts, persists new tail objects and tries to
// commit. The published file holds exactly the bytes of the resumable
// finalized; the other writer's commit publishes nothing. Writers capped
// below MaxParts never touch the part Finalize adds.
func TestFinalizeWhileTheOtherWriterGoesOn(t *testing.T) {
	h, b := setup(t, WithMaxParts(MaxParts-1))
	ctx := t.Context()
	const target = "part-0-r1-1.txt"
	w := open(t, b, target)
	first := pattern(1, MinPartSize+1000)
	write(t, w, first)
	persist(t, w) // part 1 and a tail
	more := pattern(2, 300)
	write(t, w, more)
	r, rec := persist(t, w) // part 1 and the tails of 1,300 bytes
	if len(rec.Parts) != 1 || rec.TailLength != 1300 {
		t.Fatalf("resumable: %d parts, %d tail bytes; want 1 and 1300", len(rec.Parts), rec.TailLength)
	}
	want := append(slices.Clone(first), more...)
	// The other writer goes on: a whole part more, and a tail.
	write(t, w, pattern(3, MinPartSize+10))
	persist(t, w)
	p, err := b.Finalize(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// Finalized again from the same resumable (a crash before the new
	// owner's checkpoint recorded the pending): the same part 10,000.
	p2, err := b.Finalize(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	var pr record
	if err := json.Unmarshal(p, &pr); err != nil {
		t.Fatal(err)
	}
	if n := len(pr.Parts); n != 2 || pr.Parts[0].Number != 1 || pr.Parts[1].Number != MaxParts || pr.Length != int64(len(want)) {
		t.Fatalf("pending %s: want parts 1 and %d, %d bytes", p, MaxParts, len(want))
	}
	if err := b.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := h.ReadTarget(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("published %d bytes, want the %d bytes recorded", len(got), len(want))
	}
	// The other writer closes and commits what it has: refused, at its
	// close (the upload is gone) or at its commit.
	if zp, err := w.CloseForCommit(ctx); err == nil {
		if err := b.Commit(ctx, zp); err == nil {
			t.Fatal("the other writer's commit of the finalized part succeeded")
		}
	} else if !errors.Is(err, committer.ErrDataLoss) {
		t.Fatalf("the other writer's close: %v", err)
	}
	w.Close()
	if got, err = h.ReadTarget(ctx, target); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the other writer's commit: %d bytes (%v), want the %d recorded", len(got), err, len(want))
	}
	// The second finalize's pending finds the file published; the tail
	// objects of the finalized resumable are gone.
	if err := b.Commit(ctx, p2); err != nil {
		t.Fatalf("commit of a second finalize: %v", err)
	}
	for _, tr := range rec.Tail {
		if _, err := h.client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &h.bucket, Key: aws.String(tr.Key)}); err == nil {
			t.Errorf("tail object %s of the finalized part is still there", tr.Key)
		}
	}
}
