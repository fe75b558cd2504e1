package main

// `filesink uploads` on the output of a group-mode job: the references are
// in the lanes' states.

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/proc"
	"github.com/filesink/filesink/recovery"
)

// laneUpload is an upload that a lane state's record references.
type laneUpload struct {
	lane       string
	checkpoint uint64
	key, id    string
}

// TestGroupUploadsLaneRefs: the lanes of a group member (a process of its
// own) decide a checkpoint each, and the proxy holds the completion of
// their part files; the member is stopped with SIGTERM, its handoff cut by
// the rebalance timeout, and the completions fail: each lane state's
// newest record references an upload that is still open, and the lanes'
// owner is gone. `uploads list` names, for each of them, the lane and
// checkpoint that reference it, and `uploads abort` refuses to abort one,
// by id and with --all. A new member then takes the lanes over, publishes
// those uploads and finishes the job: every record once, no upload left.
func TestGroupUploadsLaneRefs(t *testing.T) {
	j := newGroupJob(t, 2, 3000)
	bin := buildCLI(t)
	p := faultproxy.New(t, j.srv.Endpoint())
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	// Held, then answered 409 without reaching MinIO: the part files'
	// uploads stay open.
	held := p.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.CompleteMultipartUpload}, Action: faultproxy.Conflict, Gate: gate})
	cmd := exec.Command(bin, j.args(p.URL(), "--bounded", "--checkpoint-records", "500", "--checkpoint-interval", "-1s",
		"--rebalance-timeout", "2s", "--progress", "off")...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	m, err := proc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	for deadline := time.Now().Add(time.Minute); p.Fired(held) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || m.Exited() {
			t.Fatalf("the lanes did not publish a checkpoint (%s); log:\n%s", m.State(), lastLines(stderr.String(), 40))
		}
	}
	// The lanes' handoff waits for the held completions until the
	// rebalance timeout cuts it; a completion already sent is let finish,
	// so the proxy answers them then: they fail, never reaching MinIO.
	if err := m.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	cut := regexp.MustCompile(`stopping the lane without a final checkpoint`)
	for deadline := time.Now().Add(time.Minute); !cut.MatchString(stderr.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || m.Exited() {
			t.Fatalf("the handoff was not cut (%s); log:\n%s", m.State(), lastLines(stderr.String(), 40))
		}
	}
	release()
	select {
	case <-m.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the member did not exit; log:\n%s", lastLines(stderr.String(), 40))
	}
	if m.ExitCode() != 0 {
		t.Fatalf("%s:\n%s", m.State(), lastLines(stderr.String(), 40))
	}

	// What the lane states reference, read from them.
	ctx := t.Context()
	client := j.srv.Client(t)
	st, err := s3sink.NewStore(client, j.bucket, "out/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	be, err := s3sink.New(client, j.bucket, "out")
	if err != nil {
		t.Fatal(err)
	}
	heads, err := s3sink.ListLanes(ctx, st)
	if err != nil || len(heads) != 2 {
		t.Fatalf("want 2 lane states, got %d (%v)", len(heads), err)
	}
	var refs []laneUpload
	for _, h := range heads {
		if h.Checkpoint == nil {
			t.Fatalf("lane %s/%d holds no checkpoint record", h.Topic, h.Partition)
		}
		prs, err := filesink.PartRefs([]*recovery.Checkpoint{h.Checkpoint})
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range prs {
			staged, err := be.Staged(pr.Part)
			if err != nil {
				t.Fatal(err)
			}
			if !pr.Pending {
				t.Fatalf("lane %s/%d: checkpoint %d references a part in progress; group mode rolls every part at a checkpoint", h.Topic, h.Partition, h.Checkpoint.ID)
			}
			refs = append(refs, laneUpload{lane: fmt.Sprintf("%s/%d", h.Topic, h.Partition), checkpoint: h.Checkpoint.ID, key: staged.Key, id: staged.UploadID})
		}
	}
	if len(refs) < 2 {
		t.Fatalf("the lane states reference %d uploads; want one per lane at least", len(refs))
	}

	s3 := []string{"--s3-endpoint", j.srv.Endpoint(), "--s3-path-style"}
	list := mustRun(t, append([]string{"uploads", "list", "--sink", j.sink}, s3...)...)
	t.Logf("uploads list:\n%s", list.stdout)
	if strings.Contains(list.stdout, "no checkpoint record") || !strings.Contains(list.stdout, "orders/0 checkpoint") || !strings.Contains(list.stdout, "orders/1 checkpoint") {
		t.Errorf("uploads list does not say it read the lanes' records:\n%s", list.stdout)
	}
	for _, r := range refs {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(r.key) + `\s.*$`).FindString(list.stdout)
		want := fmt.Sprintf("referenced by lane %s checkpoint %d (filesink/0, pending commit)", r.lane, r.checkpoint)
		if !strings.Contains(row, r.id) || !strings.HasSuffix(row, want) {
			t.Errorf("upload %s of lane %s: row %q, want it to end with %q", r.id, r.lane, row, want)
		}
	}
	if !regexp.MustCompile(fmt.Sprintf(`\d+ upload\(s\): %d referenced, \d+ unreferenced`, len(refs))).MatchString(list.stdout) {
		t.Errorf("uploads list does not count %d referenced uploads:\n%s", len(refs), list.stdout)
	}

	r := refs[0]
	for _, args := range [][]string{
		{"uploads", "abort", "--sink", j.sink, "--upload-id", r.id},
		{"uploads", "abort", "--sink", j.sink, "--all"},
	} {
		res := cli(t, append(args, s3...)...)
		if res.code != 1 || !strings.Contains(res.stderr, r.id) ||
			!strings.Contains(res.stderr, fmt.Sprintf("lane %s checkpoint %d", r.lane, r.checkpoint)) || !strings.Contains(res.stderr, "--force") {
			t.Errorf("%s: want exit 1 naming upload %s and lane %s checkpoint %d, got %v", strings.Join(args, " "), r.id, r.lane, r.checkpoint, res)
		}
		for _, x := range refs {
			if strings.Contains(res.stdout, "aborted "+x.key) {
				t.Errorf("%s: aborted the referenced upload %s: %v", strings.Join(args, " "), x.id, res)
			}
		}
	}

	// The references were right: the next member publishes those uploads.
	next := startMember(j.args(j.srv.Endpoint(), "--bounded", "--checkpoint-interval", "100ms", "--progress", "off")...)
	if code := next.wait(t); code != 0 {
		t.Fatalf("the next member: exit %d:\n%s", code, lastLines(next.stderr.String(), 40))
	}
	checkExactlyOnce(t, s3OutputLines(t, client, j.bucket, "out"), j.want)
	list = mustRun(t, append([]string{"uploads", "list", "--sink", j.sink}, s3...)...)
	if !strings.Contains(list.stdout, "0 upload(s)") {
		t.Errorf("uploads left after the job finished:\n%s", list.stdout)
	}
}
