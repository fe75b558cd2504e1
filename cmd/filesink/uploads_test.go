package main

// `filesink uploads` against MinIO, with a job killed while a part file is
// open: its newest checkpoint record references the part's multipart
// upload and tail objects.

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/recovery"
)

// openUploadCount is the size of the jobs of these tests: 10 MB, one part
// file that stays open (it rolls at 128 MiB) until the final checkpoint.
const openUploadCount = 100000

// openRef is what the newest checkpoint record of a killed job references.
type openRef struct {
	checkpoint uint64
	key        string
	uploadID   string
	tails      []string
}

// runArgs are the arguments of the job of c.
func openUploadArgs(c *s3Chaos, extra ...string) []string {
	args := []string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", openUploadCount, chaosGenSeed),
		"--sink", c.sink, "--s3-part-size", "5MiB"}
	return append(append(args, extra...), c.flags...)
}

// killWithOpenUpload starts the job of c with a checkpoint every 2,000
// records and kills it with SIGKILL as soon as a checkpoint record
// references an open part file; it returns what the newest record
// references then.
func killWithOpenUpload(t *testing.T, c *s3Chaos) openRef {
	t.Helper()
	cmd := exec.Command(c.bin, openUploadArgs(c, "--checkpoint-records", "2000", "--checkpoint-interval", "1h")...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before a checkpoint record referenced an open part file; stderr:\n%s", err, lastLines(stderr.String(), 20))
		default:
		}
		if _, ok := newestOpenRef(t, c); ok {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("no checkpoint record referenced an open part file in time; stderr:\n%s", lastLines(stderr.String(), 20))
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	err := <-done
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the run was not killed but ended: %v; stderr:\n%s", err, lastLines(stderr.String(), 20))
	}
	ref, ok := newestOpenRef(t, c)
	if !ok {
		t.Fatal("after the kill, the newest checkpoint record references no open part file")
	}
	return ref
}

// newestOpenRef returns the open part file that the newest checkpoint
// record of c references, if it references one.
func newestOpenRef(t *testing.T, c *s3Chaos) (openRef, bool) {
	t.Helper()
	ck, err := recovery.Latest(t.Context(), c.store)
	if err != nil {
		t.Fatal(err)
	}
	if ck == nil {
		return openRef{}, false
	}
	for _, p := range ck.Participants {
		var st struct {
			Parts []struct {
				Part struct {
					Key      string `json:"key"`
					UploadID string `json:"upload_id"`
					Tail     []struct {
						Key string `json:"key"`
					} `json:"tail"`
				} `json:"part"`
			} `json:"parts"`
		}
		if err := json.Unmarshal(p.State, &st); err != nil {
			t.Fatalf("checkpoint %d: state of %s: %v", ck.ID, p.Name, err)
		}
		for _, e := range st.Parts {
			ref := openRef{checkpoint: ck.ID, key: e.Part.Key, uploadID: e.Part.UploadID}
			for _, tl := range e.Part.Tail {
				ref.tails = append(ref.tails, tl.Key)
			}
			return ref, ref.uploadID != ""
		}
	}
	return openRef{}, false
}

// uploadExists reports whether the multipart upload is still there.
func uploadExists(t *testing.T, c *s3Chaos, key, uploadID string) bool {
	t.Helper()
	_, err := c.client.ListParts(t.Context(), &s3api.ListPartsInput{Bucket: &c.bucket, Key: &key, UploadId: &uploadID})
	return err == nil
}

func newOpenUploadJob(t *testing.T) *s3Chaos {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	cfg := chaosConfig{name: "open-upload", ext: ".jsonl", parallelism: 1, bucket: func(genRecord) (string, error) { return "", nil }}
	return newS3Chaos(t, bin, srv, cfg, generated(t, openUploadCount))
}

// TestUploadsAbortRefusesReferenced: `uploads abort` refuses (exit 1, one
// line naming the upload and its checkpoint) an upload that the newest
// checkpoint record of a killed job references, by id and with --all; the
// next run then finishes the job with every record exactly once and
// verify --deep passes. With --force, abort goes ahead with a warning, and
// the next run rebuilds the part from the source (the generator still has
// its records) and finishes with every record exactly once.
func TestUploadsAbortRefusesReferenced(t *testing.T) {
	c := newOpenUploadJob(t)
	ref := killWithOpenUpload(t, c)
	s3 := c.flags
	for _, args := range [][]string{
		{"uploads", "abort", "--sink", c.sink, "--upload-id", ref.uploadID},
		{"uploads", "abort", "--sink", c.sink, "--all"},
	} {
		r := cli(t, append(args, s3...)...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], ref.key) || !strings.Contains(lines[0], ref.uploadID) ||
			!regexp.MustCompile(fmt.Sprintf(`checkpoints? ([0-9]+, )*%d\b`, ref.checkpoint)).MatchString(lines[0]) || !strings.Contains(lines[0], "--force") {
			t.Errorf("%s: want exit 1 and one line naming %s, upload %s and checkpoint %d, got %v", strings.Join(args, " "), ref.key, ref.uploadID, ref.checkpoint, r)
		}
		if strings.Contains(r.stdout, "aborted") {
			t.Errorf("%s: refused, yet says aborted: %v", strings.Join(args, " "), r)
		}
		if !uploadExists(t, c, ref.key, ref.uploadID) {
			t.Fatalf("%s: the referenced upload %s is gone", strings.Join(args, " "), ref.uploadID)
		}
	}

	// Not aborted: the next run resumes the part file and ends the job.
	r := startRun(t, c.bin, openUploadArgs(c, "--checkpoint-interval", "1h"), 0, 3*time.Minute)
	if r.outcome != exitedOK {
		t.Fatalf("the run after the refused abort: %s\n%s", r.state, lastLines(r.stderr, 20))
	}
	if next := c.decidedNext(); next != openUploadCount {
		t.Fatalf("the last checkpoint covers %d of %d records", next, openUploadCount)
	}
	c.update(2, openUploadCount)
	c.check.report(true)
	c.checkClean("after the run that followed the refused abort")

	// With --force: aborted, with a warning; the job has lost the part.
	c2 := newS3Chaos(t, c.bin, c.srv, c.check.cfg, c.check.want)
	ref2 := killWithOpenUpload(t, c2)
	r2 := cli(t, append([]string{"uploads", "abort", "--sink", c2.sink, "--upload-id", ref2.uploadID, "--force"}, s3...)...)
	if r2.code != 0 || !strings.Contains(r2.stdout, "aborted "+ref2.key+" "+ref2.uploadID) ||
		!strings.Contains(r2.stderr, "warning") || !regexp.MustCompile(fmt.Sprintf(`checkpoints? ([0-9]+, )*%d\b`, ref2.checkpoint)).MatchString(r2.stderr) {
		t.Errorf("abort --force: want exit 0, the upload aborted and a warning naming checkpoint %d, got %v", ref2.checkpoint, r2)
	}
	if uploadExists(t, c2, ref2.key, ref2.uploadID) {
		t.Errorf("abort --force: upload %s still exists", ref2.uploadID)
	}
	r = startRun(t, c2.bin, openUploadArgs(c2, "--checkpoint-interval", "1h"), 0, 3*time.Minute)
	if r.outcome != exitedOK || !strings.Contains(r.stderr, "rebuilt a part from the source") || !strings.Contains(r.stderr, ref2.key[strings.LastIndexByte(ref2.key, '/')+1:]) {
		t.Fatalf("the run after abort --force: want exit 0 and the part rebuilt, got %s\n%s", r.state, lastLines(r.stderr, 10))
	}
	c2.update(2, openUploadCount)
	c2.check.report(true)
	c2.checkClean("after the run that rebuilt the aborted part")
}

// TestUploadsListShowsReferenced: `uploads list` says, for each upload and
// tail object, which checkpoint references it: the killed job's open part
// (upload and tail objects) is referenced by the newest checkpoint, an
// upload with a tail object that no record knows is unreferenced. With a
// corrupt record object in the state, what no good record references is
// unknown; with a state that cannot be read, everything is. abort --all
// then aborts only the unreferenced upload.
func TestUploadsListShowsReferenced(t *testing.T) {
	c := newOpenUploadJob(t)
	ref := killWithOpenUpload(t, c)
	ctx := t.Context()
	be, err := s3sink.New(c.client, c.bucket, s3ChaosPrefix)
	if err != nil {
		t.Fatal(err)
	}
	w, err := be.Open(ctx, "part-0-0rphan00-1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("{\"id\":-1}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Persist(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close()
	orphanKey := s3ChaosPrefix + "/part-0-0rphan00-1.jsonl"
	ups, err := be.ListUploads(ctx, "part-")
	if err != nil || len(ups) != 2 {
		t.Fatalf("want 2 uploads (the job's and the orphan), got %+v, %v", ups, err)
	}
	orphanID := ups[0].UploadID
	if ups[0].Key != orphanKey {
		orphanID = ups[1].UploadID
	}
	list := func(extra ...string) cliResult {
		t.Helper()
		return mustRun(t, append(append([]string{"uploads", "list", "--sink", c.sink}, extra...), c.flags...)...)
	}
	row := func(r cliResult, key string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s.*$`).FindString(r.stdout)
		if m == "" {
			t.Errorf("uploads list shows no row for %s:\n%s", key, r.stdout)
		}
		return m
	}
	// The part may have been open since an older retained checkpoint,
	// which then references it too: "checkpoints 1, 2".
	want := regexp.MustCompile(fmt.Sprintf(`referenced by checkpoints? ([0-9]+, )*%d \(filesink/0, in progress\)$`, ref.checkpoint))
	r := list()
	t.Logf("uploads list:\n%s", r.stdout)
	if got := row(r, ref.key); !strings.Contains(got, ref.uploadID) || !want.MatchString(got) {
		t.Errorf("the job's upload: row %q, want %q", got, want)
	}
	if got := row(r, orphanKey); !strings.Contains(got, orphanID) || !strings.HasSuffix(got, "unreferenced") {
		t.Errorf("the orphan upload: row %q, want it unreferenced", got)
	}
	if len(ref.tails) == 0 {
		t.Fatal("the newest checkpoint references no tail object")
	}
	for _, k := range ref.tails {
		if got := row(r, k); !strings.Contains(got, fmt.Sprint(ref.checkpoint)) || !strings.Contains(got, "referenced by checkpoint") {
			t.Errorf("tail object %s of the newest checkpoint: row %q", k, got)
		}
	}
	tails, err := be.ListTails(ctx, "part-0-0rphan00-")
	if err != nil || len(tails) != 1 {
		t.Fatalf("the orphan's tail objects: %v, %v", tails, err)
	}
	if got := row(r, tails[0].Key); !strings.HasSuffix(got, "unreferenced") {
		t.Errorf("the orphan's tail object: row %q, want it unreferenced", got)
	}
	if !strings.Contains(r.stdout, "2 upload(s): 1 referenced, 1 unreferenced") {
		t.Errorf("uploads list: no count of referenced uploads:\n%s", r.stdout)
	}

	// A corrupt record object after the newest: state and list go on.
	bad := fmt.Sprintf("%s/_filesink/ckpt-%020d", s3ChaosPrefix, ref.checkpoint+1)
	if _, err := c.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &c.bucket, Key: &bad, Body: strings.NewReader("garbage")}); err != nil {
		t.Fatal(err)
	}
	r = list()
	if got := row(r, ref.key); !want.MatchString(got) {
		t.Errorf("with a corrupt record: the job's upload: row %q, want %q", got, want)
	}
	if got := row(r, orphanKey); !strings.HasSuffix(got, "unknown: corrupt checkpoint record") {
		t.Errorf("with a corrupt record: the orphan upload: row %q, want it unknown", got)
	}
	if !strings.Contains(r.stdout, bad) {
		t.Errorf("with a corrupt record: uploads list does not name %s:\n%s", bad, r.stdout)
	}
	st := cli(t, append([]string{"state", "--state", "s3://" + c.bucket + "/" + s3ChaosPrefix + "/_filesink"}, c.flags...)...)
	if st.code != 1 || !strings.Contains(st.stdout, fmt.Sprintf("checkpoint %d ", ref.checkpoint)) || !strings.Contains(st.stdout, bad) {
		t.Errorf("state with a corrupt record object: want exit 1, checkpoint %d printed and %s named, got %v", ref.checkpoint, bad, st)
	}
	if _, err := c.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &c.bucket, Key: aws.String(bad)}); err != nil {
		t.Fatal(err)
	}

	// A state that cannot be read: everything unknown.
	r = list("--state", filepath.Join(t.TempDir(), "missing"))
	for _, k := range []string{ref.key, orphanKey} {
		if got := row(r, k); !strings.HasSuffix(got, "unknown: state unreadable") {
			t.Errorf("with an unreadable state: row %q, want unknown", got)
		}
	}
	if !strings.Contains(r.stdout, "missing") {
		t.Errorf("uploads list does not say which state it could not read:\n%s", r.stdout)
	}

	// abort --all: the orphan goes, the job's upload is refused.
	r = cli(t, append([]string{"uploads", "abort", "--sink", c.sink, "--all"}, c.flags...)...)
	if r.code != 1 || !strings.Contains(r.stdout, "aborted "+orphanKey+" "+orphanID) || strings.Contains(r.stdout, ref.uploadID) ||
		!strings.Contains(r.stderr, ref.uploadID) {
		t.Errorf("abort --all: want the orphan aborted and the job's upload refused (exit 1), got %v", r)
	}
	if uploadExists(t, c, orphanKey, orphanID) || !uploadExists(t, c, ref.key, ref.uploadID) {
		t.Errorf("abort --all: the orphan must be gone and the job's upload kept")
	}
}
