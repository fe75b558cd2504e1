package recovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/filesink/filesink/vfs"
)

// JobFile is the name of the file (object) beside the records that keeps
// the job id: its content is the id and a newline.
const JobFile = "JOB"

// JobIDError reports a job id that differs from the one kept in a store.
type JobIDError struct {
	Location string // where the kept id is (Store.JobIDLocation)
	Kept     string // the id kept in the store
	Given    string // the other id
	// Meanwhile is set when the kept id was written while SetJobID wrote
	// Given (by another run), rather than found by KeepJobID.
	Meanwhile bool
}

func (e *JobIDError) Error() string {
	if e.Meanwhile {
		return fmt.Sprintf("job id: %s was written meanwhile with job id %q, not %q", e.Location, e.Kept, e.Given)
	}
	return fmt.Sprintf("job id %q differs from the job id %q kept in %s", e.Given, e.Kept, e.Location)
}

// KeepJobID returns the job id of the store s: the kept one if there is
// one, else explicit if it is not "", else derive(); an id not yet kept is
// kept in s (SetJobID) before KeepJobID returns it. An explicit id that
// differs from the kept one is a *JobIDError: the external transactions
// named by the kept id would be left behind. The caller holds the store
// (an open DirStore holds its directory's lock).
func KeepJobID(ctx context.Context, s Store, explicit string, derive func() (string, error)) (string, error) {
	kept, err := s.JobID(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case kept != "" && explicit != "" && kept != explicit:
		return "", &JobIDError{Location: s.JobIDLocation(), Kept: kept, Given: explicit}
	case kept != "":
		return kept, nil
	}
	id := explicit
	if id == "" {
		if id, err = derive(); err != nil {
			return "", err
		}
	}
	if err := s.SetJobID(ctx, id); err != nil {
		return "", err
	}
	return id, nil
}

// ParseJobID reads the content of a JOB file: the id, trimmed. An empty
// one is an error naming location.
func ParseJobID(location string, b []byte) (string, error) {
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("job id: %s is empty", location)
	}
	return id, nil
}

// JobIDLocation implements Store: DIR/JOB.
func (s *DirStore) JobIDLocation() string { return filepath.Join(s.dir, JobFile) }

// JobID implements Store: the id in DIR/JOB.
func (s *DirStore) JobID(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b, err := vfs.ReadFile(s.fs, s.JobIDLocation())
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("job id: %w", err)
	}
	return ParseJobID(s.JobIDLocation(), b)
}

// SetJobID implements Store: DIR/JOB is written as a record is (a
// synced temp file, a no-replace rename, a directory fsync).
func (s *DirStore) SetJobID(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	name := s.JobIDLocation()
	if err := s.publish(JobFile, name, []byte(id+"\n")); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("job id: keep it in %s: %w", name, err)
		}
		kept, rerr := s.JobID(ctx)
		if rerr != nil {
			return rerr
		}
		if kept != id {
			return &JobIDError{Location: name, Kept: kept, Given: id, Meanwhile: true}
		}
	}
	// Also when the same id was there: its writer may have died before
	// syncing the directory.
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("job id: keep it in %s: %w", name, err)
	}
	return nil
}

// JobRecords implements Store: the files DIR/job-<version>.json.
func (s *DirStore) JobRecords(ctx context.Context) ([]*JobRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", s.dir, err)
	}
	var out []*JobRecord
	for _, e := range ents {
		v, ok := ParseJobRecordName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		name := filepath.Join(s.dir, e.Name())
		b, err := vfs.ReadFile(s.fs, name)
		if err != nil {
			return nil, fmt.Errorf("job record: %w", err)
		}
		r, err := DecodeJobRecord(name, v, b)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *JobRecord) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// AddJobRecord implements Store: written as a record is (temp file,
// fsync, no-replace rename, directory fsync).
func (s *DirStore) AddJobRecord(ctx context.Context, r *JobRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	b, err := EncodeJobRecord(r)
	if err != nil {
		return err
	}
	name := filepath.Join(s.dir, JobRecordName(r.Version))
	if err := s.publish("job", name, b); err != nil {
		return fmt.Errorf("job record %s: %w", name, err)
	}
	return s.fs.SyncDir(s.dir)
}
