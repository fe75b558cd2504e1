package main

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestChaosKill9KafkaS3Lifecycle: Kafka to S3 (sink and state on MinIO),
// the four partitions' records interleaved in parts of 64 KiB,
// killed at random at least 40 times; after every other kill every
// multipart upload of the bucket is aborted and half of the staging tail
// objects are deleted, as a lifecycle rule would while the job is down.
// No run may fail: the parts whose staged data is gone are rebuilt from
// the recorded offsets (read committed). At the end every committed record
// is in the output once and no aborted one is.
func TestChaosKill9KafkaS3Lifecycle(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin, broker, in, rng := kafkaChaosSetup(t, true, 1<<20)
	c := newS3Chaos(t, bin, srv, chaosConfig{name: "kafka"}, nil)
	args := append([]string{"run", "--bounded", "--source", "kafka://" + broker.Addr + "/" + kafkaChaosTopic,
		"--sink", c.sink, "--checkpoint-interval", "50ms", "--part-size", "64KiB",
		"--s3-part-size", "5MiB"}, c.flags...)

	objects := map[string][]string{} // finished object -> its lines, read once
	var lostUploads, lostObjects, rebuilt int
	check := func(run int) {
		finished, _ := c.list()
		for rel := range finished {
			if _, ok := objects[rel]; ok {
				continue
			}
			b, _ := c.get(rel)
			b, err := decodeBytes(rel, b)
			if err != nil {
				t.Errorf("after run %d: %s: %v", run, rel, err)
				continue
			}
			objects[rel] = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		}
		owner := map[int64]string{}
		for rel, lines := range objects {
			for _, l := range lines {
				id, err := recordID(l)
				rec, ok := in.byID[id]
				switch {
				case err != nil || !ok:
					t.Errorf("after run %d: %s holds %.100q, not an input record", run, rel, l)
				case !rec.committed:
					t.Errorf("after run %d: record %d of an aborted transaction is in %s", run, id, rel)
				}
				if prev, ok := owner[id]; ok {
					t.Fatalf("after run %d: record %d is in %s and %s", run, id, prev, rel)
				}
				owner[id] = rel
			}
		}
	}
	decided := func() *kafkaPos {
		ids, err := c.store.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			return nil
		}
		ck, err := c.store.Get(t.Context(), ids[len(ids)-1])
		if err != nil {
			t.Fatalf("newest checkpoint record after a kill: %v", err)
		}
		return kafkaPosOf(t, ck)
	}
	kafkaChaosLoopWith(t, bin, args, kafkaLoop{
		decided: decided,
		kills:   40,
		afterKill: func(kills int) {
			if kills%2 == 0 {
				u, o := c.loseStaging(rng)
				lostUploads, lostObjects = lostUploads+u, lostObjects+o
			}
		},
		stderr: func(s string) { rebuilt += strings.Count(s, "rebuilt a part from the source") },
	}, rng, broker, check)

	n := 0
	for _, lines := range objects {
		n += len(lines)
	}
	if n != in.committed {
		t.Errorf("%d records in the output, want the %d committed ones", n, in.committed)
	}
	t.Logf("lost %d upload(s) and %d staging object(s); %d part(s) rebuilt", lostUploads, lostObjects, rebuilt)

	// Staging objects of uploads the "lifecycle rule" aborted can outlive
	// the run that finished the job; the recovery sweep of the next run
	// removes them, and publishes nothing.
	if r := startRun(t, bin, args, 0, 3*time.Minute); r.outcome != exitedOK {
		t.Fatalf("a further run: %s\n%s", r.state, lastLines(r.stderr, 20))
	}
	check(0)
	// Known leftover: after staging was lost behind the job's back, an
	// unreferenced upload or staging object can be left behind (not data,
	// not visible), which verify reports; logged, not checked.
	if left := c.uploadsLeft(); len(left) > 0 {
		t.Logf("%d incomplete multipart upload(s) left: %v", len(left), left)
	}
}
