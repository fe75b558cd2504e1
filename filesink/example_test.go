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
	"github.com/filesink/filesink/internal/vfs"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
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
