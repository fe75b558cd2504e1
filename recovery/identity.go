package recovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Identity is what defines a job: where its records come from and go, how
// they are encoded and how they are spread over buckets. A checkpoint
// store belongs to one identity; a run with another one is refused
// (CheckIdentity), because the store's positions and open parts mean
// nothing for it. The fields are canonical strings, compared as they are:
// whoever builds an Identity (the CLI from its flags) must build the same
// strings for the same job, and leave secrets out.
type Identity struct {
	// Source is the source URI without credentials: an absolute
	// "file://" path, "gen://?count=..." or "kafka://TOPIC" (the brokers
	// are not part of the job).
	Source string `json:"source"`
	// Sink is the output URI without credentials: an absolute "file://"
	// path, "s3://BUCKET/PREFIX", "mysql://HOST/DB/TABLE" or the
	// endpoint's URL.
	Sink string `json:"sink"`
	// Format is the format of the output and the options that change its
	// bytes ("jsonl", "parquet compression=zstd").
	Format string `json:"format,omitempty"`
	// Schema is a fingerprint of the schema of a bulk format
	// ("sha256:..."), "" for schemaless formats.
	Schema string `json:"schema,omitempty"`
	// Bucketing is the bucket assigner ("none", "field:cust").
	Bucketing string `json:"bucketing,omitempty"`
}

// IdentityFields returns the names of Identity's fields, in a fixed
// order: the values a deliberate change may name (CheckIdentity's allow)
// and IdentityError reports.
func IdentityFields() []string { return []string{"source", "sink", "format", "schema", "bucketing"} }

func (id Identity) field(name string) string {
	switch name {
	case "source":
		return id.Source
	case "sink":
		return id.Sink
	case "format":
		return id.Format
	case "schema":
		return id.Schema
	default:
		return id.Bucketing
	}
}

// Diff returns the names of the fields in which id and other differ, in
// IdentityFields order.
func (id Identity) Diff(other Identity) []string {
	var out []string
	for _, f := range IdentityFields() {
		if id.field(f) != other.field(f) {
			out = append(out, f)
		}
	}
	return out
}

// JobRecordVersion is the version of the job record format written.
const JobRecordVersion = 1

// JobRecord is one version of a store's job record. The first is written
// when a job first runs on the store; each deliberate change of the
// identity adds the next version and keeps the older ones, which are the
// record's history. Versions are never replaced: each is created once,
// with a write that fails if it exists (a conditional put on S3), so two
// processes sharing a store agree on every version.
type JobRecord struct {
	Format int `json:"v"`
	// Version numbers the records of a store from 1.
	Version  uint64    `json:"version"`
	Time     time.Time `json:"time"`
	Identity Identity  `json:"identity"`
	// Changed names the fields that differ from the previous version, as
	// the run that wrote it was allowed to change them; empty in the
	// first version.
	Changed []string `json:"changed,omitempty"`
	// Adopted is set on a first version written for a store that already
	// held checkpoints (written before job records were).
	Adopted bool `json:"adopted,omitempty"`
	// UID names the job for as long as its state lives, wherever the
	// state moves: every version of a store's record carries the same
	// (JobUID). A file or S3 output is claimed by one job UID
	// (filesink.ClaimOutput). Empty in records of older versions.
	UID string `json:"uid,omitempty"`
}

// JobRecordName is the name of version v of the job record beside the
// checkpoint records: "job-<8 digits>.json".
func JobRecordName(v uint64) string { return fmt.Sprintf("job-%08d.json", v) }

// ParseJobRecordName returns the version of a job record's name.
func ParseJobRecordName(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, "job-")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ".json")
	if !ok || len(digits) != 8 {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	return v, err == nil && v > 0
}

// EncodeJobRecord returns the bytes of r.
func EncodeJobRecord(r *JobRecord) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DecodeJobRecord reads a job record read from location. A record that
// does not decode, of an unknown format, or whose version is not v is a
// *CorruptError.
func DecodeJobRecord(location string, v uint64, b []byte) (*JobRecord, error) {
	var r JobRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &CorruptError{File: location, Reason: "job record does not decode", Err: errors.Join(ErrCorruptCheckpoint, err)}
	}
	switch {
	case r.Format != JobRecordVersion:
		return nil, &CorruptError{File: location, Reason: fmt.Sprintf("job record of unknown format %d (this filesink reads %d)", r.Format, JobRecordVersion), Err: ErrCorruptCheckpoint}
	case r.Version != v:
		return nil, &CorruptError{File: location, Reason: fmt.Sprintf("record says version %d", r.Version), Err: ErrCorruptCheckpoint}
	}
	return &r, nil
}

// IdentityError is a run whose identity differs from the job record of
// its store in fields it was not allowed to change.
type IdentityError struct {
	Location string   // the store
	Kept     Identity // the store's newest job record
	Given    Identity // the run's
	Fields   []string // the fields that differ and were not allowed
}

func (e *IdentityError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state %s belongs to another job:", e.Location)
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " its %s is %s, this run's is %s", f, quoteField(e.Kept.field(f)), quoteField(e.Given.field(f)))
	}
	fmt.Fprintf(&b, " (use this job's own --state; if the change is deliberate, --allow-change %s)", strings.Join(e.Fields, ","))
	return b.String()
}

func quoteField(s string) string {
	if s == "" {
		return "(none)"
	}
	return strconv.Quote(s)
}

// ErrIdentity is matched by an *IdentityError.
var ErrIdentity = errors.New("the state belongs to another job")

// Is makes an *IdentityError match ErrIdentity.
func (e *IdentityError) Is(target error) bool { return target == ErrIdentity }

// CheckIdentity compares id with the newest job record of s and returns
// the record the run goes on with:
//   - with no record, it writes version 1 (Adopted when s already holds
//     checkpoints);
//   - with a record of the same identity, it returns it (one written by a
//     version that kept no UID gets the next version, with the UID and no
//     change);
//   - with a record that differs only in fields named in allow, it writes
//     the next version, naming them in Changed;
//   - otherwise it returns an *IdentityError and writes nothing.
//
// Names in allow must be IdentityFields. A version written meanwhile by
// another process is read and compared again. A nil error guarantees that
// the returned record is durable in s and has identity id. PlanIdentity
// is the same check without the write.
func CheckIdentity(ctx context.Context, s Store, id Identity, allow []string) (*JobRecord, error) {
	for attempt := 0; ; attempt++ {
		next, write, err := PlanIdentity(ctx, s, id, allow)
		if err != nil || !write {
			return next, err
		}
		err = s.AddJobRecord(ctx, next)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, fs.ErrExist) || attempt == 3 {
			return nil, err
		}
	}
}

// PlanIdentity is CheckIdentity without the write: it returns the record
// the run goes on with, and write set when that record is not in s yet
// (CheckIdentity writes it), or the *IdentityError; the record's UID is
// always set (JobUID). It writes nothing, so
// that a run can check its identity before it has shown that it can run
// (opened its source and sink) and keep the record only then: a first run
// that fails leaves no record that would refuse the corrected command as
// another job.
func PlanIdentity(ctx context.Context, s Store, id Identity, allow []string) (rec *JobRecord, write bool, err error) {
	fields := IdentityFields()
	for _, a := range allow {
		if !slices.Contains(fields, a) {
			return nil, false, fmt.Errorf("allow change: unknown field %q (one of %s)", a, strings.Join(fields, ", "))
		}
	}
	recs, err := s.JobRecords(ctx)
	if err != nil {
		return nil, false, err
	}
	next := &JobRecord{Format: JobRecordVersion, Version: 1, Time: time.Now().UTC(), Identity: id, UID: JobUID(s, recs)}
	if n := len(recs); n > 0 {
		last := recs[n-1]
		diff := last.Identity.Diff(id)
		if len(diff) == 0 {
			if last.UID == "" {
				// Written by a version that kept none: the next version
				// keeps the UID the location gives now, so that the state
				// keeps it when it moves.
				next.Version = last.Version + 1
				return next, true, nil
			}
			return last, false, nil
		}
		var refused []string
		for _, f := range diff {
			if !slices.Contains(allow, f) {
				refused = append(refused, f)
			}
		}
		if len(refused) > 0 {
			return nil, false, &IdentityError{Location: s.Location(), Kept: last.Identity, Given: id, Fields: refused}
		}
		next.Version, next.Changed = last.Version+1, diff
		return next, true, nil
	}
	ids, err := s.List(ctx)
	if err != nil {
		return nil, false, err
	}
	next.Adopted = len(ids) > 0
	return next, true, nil
}

// JobUID returns the UID of the job whose state is s and whose job records
// are recs (oldest first): the one the records carry, else one derived from
// the store's location (an absolute path for a DirStore), which is what a
// store whose first record is not written yet, or was written by a version
// that kept none, is known by. Every process of one state (the processes of
// a group-mode job, a run and the next) finds the same UID; two states find
// two.
func JobUID(s Store, recs []*JobRecord) string {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].UID != "" {
			return recs[i].UID
		}
	}
	loc := s.Location()
	if d, ok := s.(*DirStore); ok {
		if abs, err := filepath.Abs(d.dir); err == nil {
			loc = abs
		}
	}
	sum := sha256.Sum256([]byte(loc))
	return "job-" + hex.EncodeToString(sum[:8])
}
