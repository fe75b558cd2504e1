package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/vfs"
)

// jobHold is what a command that can destroy or decide data holds while it
// acts: the job's state, locked (a local directory) or leased (S3) as a
// run holds it, so that no run starts before the command is done. live
// names the run that held the state when --force made the command go on
// without holding it ("" when it holds the state, or there was nothing to
// hold).
type jobHold struct {
	closer io.Closer // the held store; nil when nothing is held
	live   string
}

// release lets a run have the state again. Safe to call on a nil hold.
func (h *jobHold) release() {
	if h != nil && h.closer != nil {
		_ = h.closer.Close()
		h.closer = nil
	}
}

// liveJobError is a command refused because a live run holds the job.
func liveJobError(command, state, holder, what string) error {
	return exitError{code: 1, msg: fmt.Sprintf("%s: the job of state %s is running (%s): %s; stop it first (filesink run resolves this by itself when it runs again), or give --force to act anyway",
		command, state, holder, what)}
}

// holdJob proves that no live run holds the job whose state is at
// stateURI, and keeps any from starting until the hold's release: it takes
// the state directory's lock, or the S3 state's lease (waiting, as a run
// does, up to the holder's lease TTL to see whether a lease left by a
// process of another host is renewed), and in group mode checks that no
// lane has an owner that may be alive (a process of this host that is gone
// is not). command names the command in messages and in the lease ("xa
// commit"); what says what acting on a live job would do.
//
// A job held by a live run is an error naming the holder (host, pid, since
// when), unless force: the command then goes on without a hold, with a
// warning on stderr, and the returned hold's live names the holder. A
// state that does not exist holds no run: a hold of nothing. A nil error
// means that no run can decide a checkpoint of the job until release
// (except in group mode, where a process that joins meanwhile is not
// kept out, and with force).
func holdJob(ctx context.Context, command, stateURI, what string, s3f *s3Flags, client *s3api.Client, force bool, stderr io.Writer) (*jobHold, error) {
	holder, h, err := takeHold(ctx, command, stateURI, s3f, client, stderr)
	if err != nil || holder == "" {
		return h, err
	}
	if !force {
		return nil, liveJobError(command, stateURI, holder, what)
	}
	fmt.Fprintf(stderr, "filesink: warning: %s: --force: the job of state %s is running (%s); acting anyway: %s\n", command, stateURI, holder, what)
	return &jobHold{live: holder}, nil
}

// takeHold takes the state (h) or says who holds it (holder). The S3
// lease's wait for a holder's renewal is logged to stderr.
func takeHold(ctx context.Context, command, stateURI string, s3f *s3Flags, client *s3api.Client, stderr io.Writer) (holder string, h *jobHold, err error) {
	if !isS3(stateURI) {
		dir, err := localPath(stateURI, "--state")
		if err != nil {
			return "", nil, err
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return "", &jobHold{}, nil
		}
		s, err := recovery.OpenDir(ctx, vfs.OS{}, dir)
		var le *recovery.LockedError
		if errors.As(err, &le) {
			return lockHolder(le), nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		return "", &jobHold{closer: s}, nil
	}
	bucket, prefix, err := parseS3(stateURI, "--state")
	if err != nil {
		return "", nil, err
	}
	if client == nil {
		if client, err = s3f.client(ctx, nil); err != nil {
			return "", nil, err
		}
	}
	st, err := s3sink.NewStore(client, bucket, prefix, s3sink.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))), s3sink.WithLeaseHolder(command))
	if err != nil {
		return "", nil, err
	}
	heads, err := s3sink.ListLanes(ctx, st)
	if err != nil {
		return "", nil, err
	}
	if len(heads) > 0 {
		return laneHolders(heads), &jobHold{}, nil
	}
	err = st.Acquire(ctx)
	var le *s3sink.LeaseError
	if errors.As(err, &le) {
		return le.Holder(), nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return "", &jobHold{closer: st}, nil
}

// lockHolder names the holder of a locked state directory.
func lockHolder(le *recovery.LockedError) string {
	if le.PID > 0 {
		return fmt.Sprintf("a filesink process holds its lock %s: %s", lockFileOf(le.Dir), le.LockInfo)
	}
	return "a filesink process holds its lock " + lockFileOf(le.Dir)
}

func lockFileOf(dir string) string { return strings.TrimSuffix(dir, "/") + "/" + recovery.LockFile }

// laneHolders names the owners of a group-mode job's lanes that may be
// alive ("" when none may be).
func laneHolders(heads []*s3sink.LaneHead) string {
	var held []string
	for _, h := range heads {
		if !h.Held() {
			continue
		}
		held = append(held, fmt.Sprintf("lane %s/%d owned by member %q (host %s, pid %d, last written %s)",
			h.Topic, h.Partition, h.Owner.Member, h.Owner.Host, h.Owner.PID, h.Updated.Format(time.RFC3339)))
	}
	switch len(held) {
	case 0:
		return ""
	case 1:
		return "group mode: " + held[0]
	}
	return fmt.Sprintf("group mode: %s, and %d more lanes with owners that may be alive", held[0], len(held)-1)
}
