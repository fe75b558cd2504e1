package filesink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
)

// TestLiveAuditAndCheck: with a LiveRun, the audit and the check note what
// a running job has in flight (a published file whose manifest is not
// written yet, an in-progress file newer than the records) and still
// report what is wrong (an older in-progress file no record references, a
// stray or altered file, a missing one); without it, a file whose manifest
// is missing is a violation, as before.
func TestLiveAuditAndCheck(t *testing.T) {
	type setup struct {
		root     string
		target   string // a file published by the newest checkpoint
		manifest string // the newest checkpoint's manifest
	}
	tests := []struct {
		name     string
		notLive  bool
		mutate   func(t *testing.T, s setup)
		want     string // substring of a violation; "" for none
		wantNote string // substring of a note; "" for none
	}{
		{name: "clean"},
		{name: "in-progress file newer than the records", mutate: func(t *testing.T, s setup) {
			mustWriteFile(t, filepath.Join(s.root, "a", ".part-0-r1-999.jsonl.inprogress"), "{}\n")
		}, wantNote: ".part-0-r1-999.jsonl.inprogress: in-progress file of the live run"},
		{name: "in-progress file of a writer the records do not know", mutate: func(t *testing.T, s setup) {
			mustWriteFile(t, filepath.Join(s.root, "b", ".part-0-r2-0.jsonl.inprogress"), "{}\n")
		}, wantNote: ".part-0-r2-0.jsonl.inprogress: in-progress file of the live run"},
		{name: "older in-progress file no record references", mutate: func(t *testing.T, s setup) {
			mustWriteFile(t, filepath.Join(s.root, "a", ".part-0-r1-0.jsonl.inprogress"), "{}\n")
		}, want: ".part-0-r1-0.jsonl.inprogress: orphaned in-progress file"},
		{name: "manifest not written yet", mutate: func(t *testing.T, s setup) {
			mustRemove(t, s.manifest)
		}, wantNote: "the live run has not written its manifest yet"},
		{name: "manifest not written yet, not live", notLive: true, mutate: func(t *testing.T, s setup) {
			mustRemove(t, s.manifest)
		}, want: "not listed in any manifest"},
		{name: "manifest not written yet, file truncated", mutate: func(t *testing.T, s setup) {
			mustRemove(t, s.manifest)
			p := filepath.Join(s.root, filepath.FromSlash(s.target))
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()-1); err != nil {
				t.Fatal(err)
			}
		}, want: "has 39 bytes; checkpoint 4 lists 40", wantNote: "has not written its manifest yet"},
		{name: "stray visible file", mutate: func(t *testing.T, s setup) {
			mustWriteFile(t, filepath.Join(s.root, "a", "copy.jsonl"), "{}\n")
		}, want: "copy.jsonl: not listed in any manifest"},
		{name: "missing committed file", mutate: func(t *testing.T, s setup) {
			mustRemove(t, filepath.Join(s.root, filepath.FromSlash(s.target)))
		}, want: "missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			be, root := newLocal(t)
			w := newWriter(t, be, 0, filesink.WithRunID("r1"), filesink.WithAssigner(bucketing.Field("key")),
				filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 50})) // two records per part
			coord, store := newCoordinator(t, root, w)
			for i := range 40 {
				mustWrite(t, w, fmt.Appendf(nil, `{"id":%d,"key":"%c"}`, i, 'a'+i%2))
				if i%10 == 9 {
					if _, err := coord.Checkpoint(ctx, nil, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			latest, err := recovery.Latest(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			targets := targetsOf(t, be, pendingData(latest))
			if len(targets) == 0 {
				t.Fatal("setup: the newest checkpoint published nothing")
			}
			s := setup{root: root, target: targets[0],
				manifest: filepath.Join(root, "_filesink", "manifests", fmt.Sprintf("%020d-part-0.json", latest.ID))}
			if _, err := os.Stat(s.manifest); err != nil {
				t.Fatalf("setup: %v", err)
			}
			if tc.mutate != nil {
				tc.mutate(t, s)
			}

			var notes []recovery.Violation
			var live *filesink.LiveRun
			if !tc.notLive {
				live = &filesink.LiveRun{
					Records: func(ctx context.Context) ([]*recovery.Checkpoint, error) {
						recs, _, err := recovery.Readable(ctx, store)
						return recs, err
					},
					Note: func(v recovery.Violation) { notes = append(notes, v) },
				}
			}
			vs, err := filesink.Auditor{Output: be, Live: live}.Audit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			retained, err := recovery.Retained(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			cv, err := recovery.VerifyRecords(ctx, retained, filesink.Checker{Backend: be, Live: live})
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, cv...)
			if got := matching(vs, tc.want); tc.want == "" && len(vs) > 0 || tc.want != "" && got == 0 {
				t.Errorf("violations %v; want one mentioning %q", vs, tc.want)
			}
			if got := matching(notes, tc.wantNote); tc.wantNote == "" && len(notes) > 0 || tc.wantNote != "" && got == 0 {
				t.Errorf("notes %v; want one mentioning %q", notes, tc.wantNote)
			}
		})
	}
}

// matching counts the violations that mention s.
func matching(vs []recovery.Violation, s string) int {
	n := 0
	for _, v := range vs {
		if s != "" && strings.Contains(v.String(), s) {
			n++
		}
	}
	return n
}

func mustWriteFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
}
