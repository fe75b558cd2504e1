package mysqlxa_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/recovery"
)

// One subtask writing increments into db.counters, driven by a coordinator
// (the pipeline does this for a whole job).
func ExampleNew() {
	ctx := context.Background()
	var db *sql.DB           // sql.Open("mysql", "user:pass@tcp(host:3306)/db")
	var store recovery.Store // recovery.OpenDir(...)
	sink, err := mysqlxa.New(ctx, db, "counters",
		mysqlxa.WithMode(mysqlxa.Increment), mysqlxa.WithJob("wordcount"), mysqlxa.WithSubtask(0))
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()
	coord, err := committer.New(store, []committer.Participant{sink})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := coord.Recover(ctx); err != nil { // re-commit, roll back, sweep
		log.Fatal(err)
	}
	// ... sink.Write(ctx, record, origin) for each record, then
	// coord.Checkpoint(ctx, sourcePosition, final) now and then.
}
