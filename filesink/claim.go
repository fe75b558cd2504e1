package filesink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
)

// ClaimDir is the metadata directory (relative to driver.MetaDir) of an
// output's claims: _filesink/claims/<8 digits>.json.
const ClaimDir = "claims"

// ClaimVersion is the format of the claims written.
const ClaimVersion = 1

// Claim says which job an output belongs to: one output, one job. The
// first run of a job on an output creates version 1, with a write that
// never replaces (a no-replace publish on local disk, If-None-Match on
// S3), before it publishes or sweeps anything there; every later run of
// the job finds its own UID in the newest version. A run of another job
// (another state) finds another UID and is refused, even when both started
// at the same instant: only one creation of a version succeeds. A job that
// rebuilds a lost state from the output (--resume-from-output) takes the
// output over by writing the next version.
type Claim struct {
	Format  int    `json:"v"`
	Version uint64 `json:"version"`
	// Job is the UID of the job that owns the output
	// (recovery.JobRecord.UID).
	Job string `json:"job"`
	// State is where the job kept its state when it claimed the output,
	// for messages.
	State string `json:"state"`
	// Host and PID are the process that wrote the claim, Time when.
	Host string    `json:"host,omitempty"`
	PID  int       `json:"pid,omitempty"`
	Time time.Time `json:"time"`
	// TakenFrom is the UID of the job whose claim this version replaced
	// (--resume-from-output), "" in version 1.
	TakenFrom string `json:"taken_from,omitempty"`
}

// ClaimName is the metadata name of version v of an output's claim.
func ClaimName(v uint64) string { return fmt.Sprintf("%s/%08d.json", ClaimDir, v) }

// OutputName names an output as a user does: its directory or
// s3://BUCKET/PREFIX.
func OutputName(o driver.Output) string { return strings.TrimSuffix(o.FileLocation(""), "/") }

// ErrClaimed is matched by a *ClaimError.
var ErrClaimed = errors.New("the output belongs to another job")

// ClaimError is a run refused because its output is claimed by another
// job.
type ClaimError struct {
	Location string // the claim's location
	Output   string // the output, as a user names it
	Claim    *Claim // the newest claim
	Job      string // this run's job UID
	State    string // this run's state
}

func (e *ClaimError) Error() string {
	c := e.Claim
	who := fmt.Sprintf("claimed %s", c.Time.Format(time.RFC3339))
	if c.Host != "" {
		who += fmt.Sprintf(" by host %s, pid %d", c.Host, c.PID)
	}
	return fmt.Sprintf("output %s belongs to another job: %s names the job whose state is %s (%s, %s), not this run's state %s: "+
		"run that job with its own --state, or write this job to another --sink; if that job's state was lost, rebuild it with --resume-from-output",
		e.Output, e.Location, c.State, c.Job, who, e.State)
}

// Is makes a *ClaimError match ErrClaimed.
func (e *ClaimError) Is(target error) bool { return target == ErrClaimed }

// ReadClaim returns the newest claim of out, nil if it has none. A claim
// that does not decode, or of a newer format than this package reads, is
// an error naming it.
func ReadClaim(ctx context.Context, out driver.Output) (*Claim, error) {
	names, err := out.ListMeta(ctx, ClaimDir)
	if err != nil {
		return nil, fmt.Errorf("claim of the output: %w", err)
	}
	for i := len(names) - 1; i >= 0; i-- {
		v, ok := parseClaimName(names[i])
		if !ok {
			continue
		}
		return readClaim(ctx, out, v)
	}
	return nil, nil
}

func parseClaimName(name string) (uint64, bool) {
	base := name[strings.LastIndex(name, "/")+1:]
	digits, ok := strings.CutSuffix(base, ".json")
	if !ok || len(digits) != 8 {
		return 0, false
	}
	var v uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, v > 0
}

func readClaim(ctx context.Context, out driver.Output, v uint64) (*Claim, error) {
	name := ClaimName(v)
	b, err := out.GetMeta(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("claim of the output %s: %w", out.MetaLocation(name), err)
	}
	var c Claim
	switch err := json.Unmarshal(b, &c); {
	case err != nil:
		return nil, fmt.Errorf("claim of the output %s does not decode: %w", out.MetaLocation(name), err)
	case c.Format > ClaimVersion:
		return nil, fmt.Errorf("claim of the output %s is of format %d; this filesink reads %d (upgrade it)", out.MetaLocation(name), c.Format, ClaimVersion)
	case c.Version != v || c.Job == "":
		return nil, fmt.Errorf("claim of the output %s is defective (version %d, job %q)", out.MetaLocation(name), c.Version, c.Job)
	}
	return &c, nil
}

// CheckClaim returns nil if out is unclaimed or claimed by job, and a
// *ClaimError naming the owner otherwise (nil too with takeover: the run
// will take the output over). It writes nothing. state and output name
// this run's state and the output in the error.
func CheckClaim(ctx context.Context, out driver.Output, output, job, state string, takeover bool) error {
	c, err := ReadClaim(ctx, out)
	if err != nil || c == nil || c.Job == job || takeover {
		return err
	}
	return &ClaimError{Location: out.MetaLocation(ClaimName(c.Version)), Output: output, Claim: c, Job: job, State: state}
}

// ClaimOutput makes out the output of job (state: where it keeps its
// state, for messages): if out has no claim it creates version 1; if the
// newest claim is job's it returns it; if it is another job's it returns a
// *ClaimError, unless takeover, when it writes the next version naming
// job. Each version is created once, never replaced: of two runs that
// claim an empty output at the same instant, one creates version 1 and the
// other finds it and is refused. A nil error guarantees that the newest
// claim of out, durable, names job.
func ClaimOutput(ctx context.Context, out driver.Output, output, job, state string, takeover bool) (*Claim, error) {
	host, _ := os.Hostname()
	for attempt := 0; ; attempt++ {
		cur, err := ReadClaim(ctx, out)
		if err != nil {
			return nil, err
		}
		next := &Claim{Format: ClaimVersion, Version: 1, Job: job, State: state, Host: host, PID: os.Getpid(), Time: time.Now().UTC()}
		switch {
		case cur != nil && cur.Job == job:
			return cur, nil
		case cur != nil && !takeover:
			return nil, &ClaimError{Location: out.MetaLocation(ClaimName(cur.Version)), Output: output, Claim: cur, Job: job, State: state}
		case cur != nil:
			next.Version, next.TakenFrom = cur.Version+1, cur.Job
		}
		b, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return nil, err
		}
		err = out.PutMeta(ctx, ClaimName(next.Version), append(b, '\n'))
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, committer.ErrAlreadyExists) || attempt == 3 {
			return nil, fmt.Errorf("claim the output: %w", err)
		}
		// Another run created that version first: read it.
	}
}
