package main

import (
	"context"

	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/vfs"
)

// readJobFile (for tests) returns the job id kept in the state directory dir ("" if
// none), without locking or writing it.
func readJobFile(dir string) (string, error) {
	s, err := recovery.OpenDir(context.Background(), vfs.OS{}, dir, recovery.ReadOnly())
	if err != nil {
		return "", err
	}
	return s.JobID(context.Background())
}

// writeJobFile (for tests) keeps id in the state directory dir (DIR/JOB) durably, as
// run does: an id kept meanwhile is never replaced.
func writeJobFile(dir, id string) error {
	s, err := recovery.OpenDir(context.Background(), vfs.OS{}, dir)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.SetJobID(context.Background(), id)
}
