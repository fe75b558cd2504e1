package filesink_test

import (
	"context"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

// Example writes records into one bucket per "country" through the commit
// protocol: a Writer is the participant, a Coordinator with a checkpoint
// store in OUT/_filesink decides and commits. After the final checkpoint
// every record is in a finished part file, exactly once.
func Example() {
	ctx := context.Background()
	out, err := os.MkdirTemp("", "filesink-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(out)

	backend := localfs.New(vfs.OS{}, out)
	w, err := filesink.New(backend, 0,
		filesink.WithAssigner(bucketing.Field("country")),
		filesink.WithRunID("example"), // only for a deterministic output; leave it random
	)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(out, "_filesink"))
	if err != nil {
		log.Fatal(err)
	}
	coord, err := committer.New(store, []committer.Participant{w})
	if err != nil {
		log.Fatal(err)
	}
	// Recover commits what an earlier run decided, restores the writer and
	// sweeps orphans; on a fresh output it does nothing.
	if _, err := coord.Recover(ctx); err != nil {
		log.Fatal(err)
	}

	records := []string{
		`{"id":1,"country":"fr","name":"Ada"}`,
		`{"id":2,"country":"de","name":"Bo"}`,
		`{"id":3,"country":"fr","name":"Cy"}`,
	}
	for i, r := range records {
		if err := w.Write(ctx, []byte(r), source.Origin{Name: "example", Num: int64(i + 1)}); err != nil {
			log.Fatal(err)
		}
	}
	// The final checkpoint closes every part file and publishes it.
	if _, err := coord.Checkpoint(ctx, nil, true); err != nil {
		log.Fatal(err)
	}

	backend.Walk(ctx, func(rel string, _ fs.DirEntry) error {
		data, err := os.ReadFile(filepath.Join(out, rel))
		fmt.Printf("%s:\n%s", rel, data)
		return err
	})
	// Output:
	// de/part-0-example-1.jsonl:
	// {"id":2,"country":"de","name":"Bo"}
	// fr/part-0-example-0.jsonl:
	// {"id":1,"country":"fr","name":"Ada"}
	// {"id":3,"country":"fr","name":"Cy"}
}

// ExampleReadManifests follows an output through its commit manifests:
// each checkpoint's files appear in one manifest, written after all of
// them are visible, so a consumer that reads manifests in checkpoint order
// sees whole checkpoints and never a file twice.
func ExampleReadManifests() {
	ctx := context.Background()
	out, err := os.MkdirTemp("", "filesink-manifests")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(out)

	backend := localfs.New(vfs.OS{}, out)
	w, err := filesink.New(backend, 0, filesink.WithRunID("example"),
		filesink.WithRollingPolicy(filesink.OnCheckpointPolicy{}))
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(out, "_filesink"))
	if err != nil {
		log.Fatal(err)
	}
	coord, err := committer.New(store, []committer.Participant{w})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := coord.Recover(ctx); err != nil {
		log.Fatal(err)
	}
	for i := range 5 {
		rec := fmt.Sprintf(`{"id":%d}`, i)
		if err := w.Write(ctx, []byte(rec), source.Origin{Name: "gen", Num: int64(i)}); err != nil {
			log.Fatal(err)
		}
		if i%2 == 1 { // a checkpoint after every second record
			if _, err := coord.Checkpoint(ctx, nil, false); err != nil {
				log.Fatal(err)
			}
		}
	}
	if _, err := coord.Checkpoint(ctx, nil, true); err != nil {
		log.Fatal(err)
	}

	manifests, err := filesink.ReadManifests(ctx, backend)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range manifests {
		for _, f := range m.Files {
			s := f.Sources[0]
			fmt.Printf("checkpoint %d: %s, %d records, %s %d..%d\n", m.Checkpoint, f.Path, f.Records, s.Input, s.First, s.Last)
		}
	}
	// Output:
	// checkpoint 1: part-0-example-0.jsonl, 2 records, gen 0..1
	// checkpoint 2: part-0-example-1.jsonl, 2 records, gen 2..3
	// checkpoint 3: part-0-example-2.jsonl, 1 records, gen 4..4
}
