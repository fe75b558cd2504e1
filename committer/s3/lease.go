package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
)

// LeaseFile is the object beside the checkpoint records that the run
// owning the store holds (Acquire): PREFIX/LEASE.
const LeaseFile = "LEASE"

// DefaultLeaseTTL is the lease TTL without WithLeaseTTL.
const DefaultLeaseTTL = 30 * time.Second

// Bounds of WithLeaseTTL.
const (
	MinLeaseTTL = 100 * time.Millisecond
	MaxLeaseTTL = time.Hour
)

// ErrStateInUse is matched (errors.Is) by the error of Acquire when another
// live run holds the store's lease (a *LeaseError).
var ErrStateInUse = errors.New("state in use")

// ErrLeaseLost is matched by the error of every Put, Delete and SetJobID of
// a store whose lease was taken over by another run, or released by
// Release or Close: the store no longer decides checkpoints.
var ErrLeaseLost = errors.New("lease lost")

// LeaseError reports a store whose lease another run holds and renews. It
// matches ErrStateInUse.
type LeaseError struct {
	Location string        // the store, s3://bucket/prefix
	Host     string        // the holder's host name, "" when unknown
	PID      int           // the holder's process id, 0 when unknown
	Started  string        // when the holder took the lease (RFC 3339), "" when unknown
	TTL      time.Duration // the holder's lease TTL
	// Command is what holds the lease when it is not a run, such as
	// "uploads abort" (WithLeaseHolder); "" for a run.
	Command string
}

func (e *LeaseError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("state %s is in use by filesink %s (%s): wait for it to end, or for its lease to expire %v after it dies",
			e.Location, e.Command, holderText(e.Host, e.PID, e.Started), e.TTL)
	}
	return fmt.Sprintf("state %s is in use by another filesink run (%s): stop it, or wait for its lease to expire %v after it dies",
		e.Location, holderText(e.Host, e.PID, e.Started), e.TTL)
}

// Holder names the lease's holder for a message: "host H, pid P, started
// T", with the command when it is not a run.
func (e *LeaseError) Holder() string {
	h := holderText(e.Host, e.PID, e.Started)
	if e.Command != "" {
		h = "filesink " + e.Command + ", " + h
	}
	return h
}

// Unwrap returns ErrStateInUse.
func (e *LeaseError) Unwrap() error { return ErrStateInUse }

func holderText(host string, pid int, started string) string {
	if host == "" {
		host = "unknown host"
	}
	s := fmt.Sprintf("host %s, pid %d", host, pid)
	if started != "" {
		s += ", started " + started
	}
	return s
}

// leaseRecord is the content of the LEASE object. Seq grows by one at every
// write, so that every version has other bytes (and another ETag).
type leaseRecord struct {
	V        int    `json:"v"`
	Run      string `json:"run"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Started  string `json:"started"`
	Seq      uint64 `json:"seq"`
	TTLms    int64  `json:"ttl_ms"`
	Released bool   `json:"released"`
	Command  string `json:"command,omitempty"` // WithLeaseHolder; "" for a run
}

// leaseObject is one observed version of the LEASE object.
type leaseObject struct {
	body   []byte
	etag   string
	rec    leaseRecord
	parsed bool      // body is a version 1 lease record
	at     time.Time // when the read that returned it ended
	// modified is when the store last wrote it, and served when the store
	// answered the read, both on the store's clock (zero when unknown).
	modified, served time.Time
}

// ttl is the holder's TTL (def when the record does not say), clamped to
// the bounds of WithLeaseTTL.
func (o *leaseObject) ttl(def time.Duration) time.Duration {
	if !o.parsed || o.rec.TTLms <= 0 {
		return def
	}
	return min(max(time.Duration(o.rec.TTLms)*time.Millisecond, MinLeaseTTL), MaxLeaseTTL)
}

type leaseState int

const (
	leaseNone     leaseState = iota // never acquired: no checks
	leaseHeld                       // held and renewed
	leaseLost                       // another run wrote the lease
	leaseReleased                   // released by Release or Close
)

// lease is a store's lease on its prefix.
type lease struct {
	write sync.Mutex // serializes the writes of LEASE (renewals, release)

	mu      sync.Mutex // guards the fields below
	state   leaseState
	rec     leaseRecord // the content last written
	etag    string      // its ETag
	renewed time.Time   // start of the request that wrote it (monotonic)
	fenced  error       // in leaseLost and leaseReleased: the error of Put
	stop    context.CancelFunc
	done    chan struct{} // closed when the renewal goroutine returns
}

// leaseAttempts bounds the rounds of Acquire (read, evaluate, write) that
// end in a conflict with another writer of the lease.
const leaseAttempts = 5

// leaseCloseTimeout bounds the release of Close.
const leaseCloseTimeout = 10 * time.Second

func (s *Store) leaseKey() string { return s.dir() + LeaseFile }

// LeaseLocation names the lease object: s3://bucket/prefix/LEASE.
func (s *Store) LeaseLocation() string { return s.url(s.leaseKey()) }

// Acquire takes the store's lease, the exclusion of other runs on the same
// state: the object PREFIX/LEASE, created with If-None-Match: * or taken
// over with If-Match on the ETag read, and renewed by a goroutine every
// TTL/3 (WithLeaseTTL, default DefaultLeaseTTL) until Release or Close.
// A lease is taken over at once when its holder released it, or when the
// holder ran on this host (same host name) and its process is gone; else
// when it stays unchanged (same ETag) for the holder's TTL, measured on
// this process's monotonic clock from the first read. A holder that renews
// it meanwhile is alive: Acquire returns a *LeaseError (ErrStateInUse)
// naming it. So a second run on a live state is refused after at most
// about a third of the TTL, and a run that died on another host blocks its
// state for one TTL.
//
// Once acquired, every Put first checks that the lease was renewed by a
// request that started less than two thirds of the TTL ago (renewing it
// synchronously when a third has passed) and is sent with that deadline;
// a lease that another run took over fences the store: Put, Delete and
// SetJobID fail with an error matching ErrLeaseLost that names the new
// holder. This keeps a paused or cut-off holder from deciding a checkpoint
// after a competitor may consider its lease stale, assuming that the two
// processes' clocks run at about the same rate (not that they agree) and
// that a request is not delayed in the network by more than a third of the
// TTL after its deadline. The scale-out design replaces this lease by
// epoch fencing of a per-lane HEAD object, which the store enforces.
//
// On a store without conditional writes (PutObject answers
// NotImplemented), Acquire logs a warning and returns nil without a lease:
// nothing excludes a second run there. A nil error means this store holds
// the lease (or the store cannot hold one, as just said). Acquire must be
// called at most once per Store, before its records are read for
// recovery; it is safe for concurrent use with the other methods.
func (s *Store) Acquire(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.lease.mu.Lock()
	st := s.lease.state
	s.lease.mu.Unlock()
	if st != leaseNone {
		return fmt.Errorf("state %s: the lease was acquired before", s.Location())
	}
	me := s.newLeaseRecord()
	for range leaseAttempts {
		cur, err := s.readLease(ctx)
		if err != nil {
			return err
		}
		ifMatch, seq := "", uint64(0)
		if cur != nil {
			if !cur.rec.Released && !s.holderDead(cur) {
				next, stale, err := s.watchLease(ctx, cur)
				if err != nil {
					return err
				}
				if !stale {
					if next != nil && !(next.parsed && next.rec.Released) {
						return s.inUse(next)
					}
					continue // released or deleted meanwhile: evaluate again
				}
			}
			ifMatch, seq = cur.etag, cur.rec.Seq
		}
		me.Seq = seq + 1
		done, err := s.takeLease(ctx, me, ifMatch)
		if done || err != nil {
			return err
		}
	}
	return fmt.Errorf("state %s: the lease %s changed %d times while this run tried to take it: other runs are starting on this state", s.Location(), s.LeaseLocation(), leaseAttempts)
}

// takeLease writes me over the version ifMatch ("": none) and starts the
// renewals. done is false after a conflict: another writer came first.
func (s *Store) takeLease(ctx context.Context, me leaseRecord, ifMatch string) (done bool, err error) {
	body, err := json.Marshal(me)
	if err != nil {
		return false, err
	}
	start := time.Now()
	etag, conflict, err := s.writeLease(ctx, body, ifMatch)
	switch {
	case isNotImplemented(err):
		s.o.log.Warn("s3: the store does not support conditional writes: nothing keeps a second run off this state; run one job per state",
			"state", s.Location())
		return true, nil
	case conflict:
		return false, nil
	case err != nil:
		cur, rerr := s.readLease(ctx)
		if rerr != nil || cur == nil || !bytes.Equal(cur.body, body) {
			return false, fmt.Errorf("state %s: take the lease %s: %w", s.Location(), s.LeaseLocation(), err)
		}
		etag = cur.etag // written; the reply was lost
	}
	loopCtx, stop := context.WithCancel(context.Background())
	l := &s.lease
	l.mu.Lock()
	l.state, l.rec, l.etag, l.renewed = leaseHeld, me, etag, start
	l.stop, l.done = stop, make(chan struct{})
	l.mu.Unlock()
	go s.renewLoop(loopCtx, l.done)
	return true, nil
}

func (s *Store) newLeaseRecord() leaseRecord {
	host, pid := s.o.leaseHost, s.o.leasePID
	if host == "" {
		host, _ = os.Hostname()
	}
	if pid == 0 {
		pid = os.Getpid()
	}
	return leaseRecord{V: 1, Run: randHex(8), Host: host, PID: pid,
		Started: time.Now().UTC().Format(time.RFC3339), TTLms: s.o.leaseTTL.Milliseconds(), Command: s.o.leaseCommand}
}

// holderDead reports that cur's holder ran on this host and its process is
// gone.
func (s *Store) holderDead(cur *leaseObject) bool {
	if !cur.parsed || cur.rec.Host == "" || cur.rec.PID <= 0 {
		return false
	}
	host := s.o.leaseHost
	if host == "" {
		host, _ = os.Hostname()
	}
	return cur.rec.Host == host && !processAlive(cur.rec.PID)
}

// watchLease reads the lease until it changes (next: the new version, nil
// if it was deleted) or until it stayed the same for the holder's TTL
// (stale), counted from the end of the read that returned cur.
func (s *Store) watchLease(ctx context.Context, cur *leaseObject) (next *leaseObject, stale bool, err error) {
	ttl := cur.ttl(s.o.leaseTTL)
	s.o.log.Info("s3: the state is leased by another run; waiting to see whether it renews its lease", "state", s.Location(),
		"host", cur.rec.Host, "pid", cur.rec.PID, "started", cur.rec.Started, "up_to", ttl)
	poll := max(ttl/10, 10*time.Millisecond)
	for {
		elapsed := time.Since(cur.at)
		if elapsed < ttl {
			t := time.NewTimer(min(poll, ttl-elapsed))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, false, ctx.Err()
			case <-t.C:
			}
		}
		next, err := s.readLease(ctx)
		if err != nil {
			return nil, false, err
		}
		if next == nil || next.etag != cur.etag {
			return next, false, nil
		}
		if elapsed >= ttl {
			return nil, true, nil // unchanged on a read started a TTL after the first
		}
	}
}

// LeaseHolder is the run that holds a store's lease, as the lease says.
type LeaseHolder struct {
	Host    string        // the holder's host name, "" when unknown
	PID     int           // the holder's process id, 0 when unknown
	Started string        // when it took the lease (RFC 3339), "" when unknown
	TTL     time.Duration // the holder's lease TTL
	// Command is what holds the lease when it is not a run, such as
	// "uploads abort" (WithLeaseHolder); "" for a run.
	Command string
}

// String is "host H, pid P, started T", as in the message of a
// LeaseError, with the command when it is not a run.
func (h *LeaseHolder) String() string {
	return (&LeaseError{Host: h.Host, PID: h.PID, Started: h.Started, Command: h.Command}).Holder()
}

// Holder reads the store's lease once, without taking or waiting for it,
// and returns its holder when a run may hold it now: the lease is there,
// not released, its holder is not a process of this host that is gone,
// and the store last wrote it less than one TTL (plus a second, the
// resolution of its clock) before it answered (a live holder renews it
// every third of its TTL). A lease that is not a lease record counts as
// held, by an unknown holder. A nil error with a nil holder means no run
// holds the lease; an error means it could not be read. Safe for
// concurrent use; it does not change the store's own lease.
func (s *Store) Holder(ctx context.Context) (*LeaseHolder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cur, err := s.readLease(ctx)
	if err != nil || cur == nil || cur.rec.Released || s.holderDead(cur) {
		return nil, err
	}
	ttl := cur.ttl(s.o.leaseTTL)
	if !cur.modified.IsZero() && !cur.served.IsZero() && cur.served.Sub(cur.modified) > ttl+time.Second {
		return nil, nil // stale: its holder stopped renewing it
	}
	return &LeaseHolder{Host: cur.rec.Host, PID: cur.rec.PID, Started: cur.rec.Started, TTL: ttl, Command: cur.rec.Command}, nil
}

func (s *Store) inUse(holder *leaseObject) error {
	return &LeaseError{Location: s.Location(), Host: holder.rec.Host, PID: holder.rec.PID,
		Started: holder.rec.Started, TTL: holder.ttl(s.o.leaseTTL), Command: holder.rec.Command}
}

// readLease returns the current version of the lease, nil if there is none.
func (s *Store) readLease(ctx context.Context) (*leaseObject, error) {
	key := s.leaseKey()
	out, err := s.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &s.bucket, Key: &key}, s.call())
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state %s: read the lease %s: %w", s.Location(), s.LeaseLocation(), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("state %s: read the lease %s: %w", s.Location(), s.LeaseLocation(), err)
	}
	o := &leaseObject{body: b, etag: aws.ToString(out.ETag), at: time.Now(), modified: aws.ToTime(out.LastModified)}
	o.served, _ = awsmiddleware.GetServerTime(out.ResultMetadata)
	o.parsed = json.Unmarshal(b, &o.rec) == nil && o.rec.V == 1
	if !o.parsed {
		o.rec = leaseRecord{}
	}
	return o, nil
}

// writeLease writes body with If-Match: ifMatch, or If-None-Match: * when
// ifMatch is "". conflict reports that the precondition failed (another
// version is there, or none is); err is any other failure, whose outcome is
// unknown.
func (s *Store) writeLease(ctx context.Context, body []byte, ifMatch string) (etag string, conflict bool, err error) {
	key := s.leaseKey()
	in := &s3api.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
		ContentType:          aws.String("application/json"),
		ServerSideEncryption: s.o.sseType(), SSEKMSKeyId: s.o.kmsKey(),
	}
	if ifMatch == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(ifMatch)
	}
	out, err := s.client.PutObject(ctx, in, s.call())
	switch {
	case err == nil:
		return aws.ToString(out.ETag), false, nil
	case isPreconditionFailed(err) || apiCode(err) == "ConditionalRequestConflict" || (ifMatch != "" && isNotFound(err)):
		return "", true, nil
	}
	return "", false, err
}

// renewLoop renews the lease every TTL/3 (counted from the start of the
// last renewal, which Put may have made) until ctx is cancelled or the
// lease is lost.
func (s *Store) renewLoop(ctx context.Context, done chan struct{}) {
	defer close(done)
	ttl := s.o.leaseTTL
	var failed bool
	for {
		s.lease.mu.Lock()
		wait := time.Until(s.lease.renewed.Add(ttl / 3))
		s.lease.mu.Unlock()
		if failed {
			wait = max(wait, ttl/10)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, renewTimeout(ttl))
		err := s.renew(rctx)
		cancel()
		failed = err != nil
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrLeaseLost):
			s.o.log.Error("s3: "+err.Error(), "state", s.Location())
			return
		case err != nil:
			s.o.log.Warn("s3: lease renewal failed; retrying", "state", s.Location(), "err", err)
		}
	}
}

// renewTimeout bounds one renewal (its write and the read that resolves
// an unknown outcome).
func renewTimeout(ttl time.Duration) time.Duration { return max(ttl/3, time.Second) }

// renew writes the next version of the lease over the last one. An error
// matching ErrLeaseLost means another run holds it now; another error
// leaves the lease held but not renewed.
func (s *Store) renew(ctx context.Context) error {
	l := &s.lease
	l.write.Lock()
	defer l.write.Unlock()
	l.mu.Lock()
	if l.state != leaseHeld {
		err := l.fenced
		l.mu.Unlock()
		return err
	}
	rec, etag := l.rec, l.etag
	l.mu.Unlock()
	rec.Seq++
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	start := time.Now()
	newTag, conflict, werr := s.writeLease(ctx, body, etag)
	if werr == nil && !conflict {
		l.renewedTo(rec, newTag, start)
		return nil
	}
	// Resolve by reading back: our exact bytes mean renewed (an attempt
	// whose reply was lost wrote them).
	cur, rerr := s.readLease(ctx)
	switch {
	case rerr != nil:
		return fmt.Errorf("state %s: renew the lease: %w", s.Location(), errors.Join(werr, rerr))
	case cur != nil && bytes.Equal(cur.body, body):
		l.renewedTo(rec, cur.etag, start)
		return nil
	case cur != nil && cur.parsed && cur.rec.Run == rec.Run && !cur.rec.Released:
		// Still ours, an earlier version: not renewed this time.
		l.mu.Lock()
		l.rec, l.etag = cur.rec, cur.etag
		l.mu.Unlock()
		if werr == nil {
			werr = errors.New("the lease changed while it was renewed")
		}
		return fmt.Errorf("state %s: renew the lease: %w", s.Location(), werr)
	}
	return l.lose(s.Location(), cur)
}

func (l *lease) renewedTo(rec leaseRecord, etag string, start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leaseHeld {
		l.rec, l.etag, l.renewed = rec, etag, start
	}
}

// lose fences the store: cur is the version another run wrote (nil: the
// lease object was deleted).
func (l *lease) lose(location string, cur *leaseObject) error {
	holder := "the lease object was deleted"
	if cur != nil {
		holder = "now held by " + holderText(cur.rec.Host, cur.rec.PID, cur.rec.Started)
		if cur.parsed && cur.rec.Released {
			holder = "released by another run"
		}
	}
	err := fmt.Errorf("state %s was taken over by another run (%s); this run decides no more checkpoints: %w", location, holder, ErrLeaseLost)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leaseHeld {
		l.state, l.fenced = leaseLost, err
	}
	return l.fenced
}

// leaseGuard checks the lease before a record is written: a store without
// a lease passes; a held lease must have been renewed by a request that
// started less than 2/3 TTL ago (it is renewed first when 1/3 TTL has
// passed), and the returned context ends at that 2/3 TTL.
func (s *Store) leaseGuard(ctx context.Context) (context.Context, context.CancelFunc, error) {
	l := &s.lease
	l.mu.Lock()
	st, renewed, fenced := l.state, l.renewed, l.fenced
	l.mu.Unlock()
	switch st {
	case leaseNone:
		return ctx, func() {}, nil
	case leaseLost, leaseReleased:
		return nil, nil, fenced
	}
	ttl := s.o.leaseTTL
	var rerr error
	if time.Since(renewed) >= ttl/3 {
		// A conditional write: safe at any time, also long after a pause.
		rctx, cancel := context.WithTimeout(ctx, renewTimeout(ttl))
		rerr = s.renew(rctx)
		cancel()
		if errors.Is(rerr, ErrLeaseLost) {
			return nil, nil, rerr
		}
		l.mu.Lock()
		renewed = l.renewed
		l.mu.Unlock()
	}
	deadline := renewed.Add(ttl - ttl/3)
	if !time.Now().Before(deadline) {
		return nil, nil, fmt.Errorf("state %s: the lease was last renewed %v ago, too long to decide a checkpoint safely (renewal: %v)",
			s.Location(), time.Since(renewed).Round(time.Millisecond), rerr)
	}
	c, cancel := context.WithDeadline(ctx, deadline)
	return c, cancel, nil
}

// leaseFenced returns the error of a store whose lease is lost or
// released, nil otherwise.
func (s *Store) leaseFenced() error {
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	if s.lease.state == leaseLost || s.lease.state == leaseReleased {
		return s.lease.fenced
	}
	return nil
}

// CheckLease reads the lease and returns the error of Put (matching
// ErrLeaseLost, naming the new holder) if another run took it over, or
// it was released; nil if this store still holds it, or holds none. A run
// that failed calls it to tell a failure caused by losing the lease (a
// request cut off while the process was paused, answered with an opaque
// status) from any other: the lease's loss is then what to report. An
// error that does not match ErrLeaseLost means the lease could not be
// read. Safe for concurrent use.
func (s *Store) CheckLease(ctx context.Context) error {
	l := &s.lease
	l.mu.Lock()
	st, run, fenced := l.state, l.rec.Run, l.fenced
	l.mu.Unlock()
	switch st {
	case leaseNone:
		return nil
	case leaseLost, leaseReleased:
		return fenced
	}
	cur, err := s.readLease(ctx)
	if err != nil {
		return err
	}
	if cur != nil && cur.parsed && cur.rec.Run == run && !cur.rec.Released {
		return nil
	}
	return l.lose(s.Location(), cur)
}

// Release gives the lease up: the renewals stop and the lease is written
// with released set (If-Match, so that a run that took it over meanwhile
// keeps it), so that the next run takes it over at once. Afterwards Put,
// Delete and SetJobID fail (ErrLeaseLost). A store without a lease, or
// whose lease is lost, has nothing to release: nil. A nil error means the
// lease object says released, or belongs to another run. Safe for
// concurrent use; a second call is a no-op.
func (s *Store) Release(ctx context.Context) error {
	l := &s.lease
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop = nil
	l.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-done
	l.write.Lock()
	defer l.write.Unlock()
	l.mu.Lock()
	if l.state != leaseHeld {
		l.mu.Unlock()
		return nil
	}
	rec, etag := l.rec, l.etag
	l.state = leaseReleased
	l.fenced = fmt.Errorf("state %s: the lease was released by this run: %w", s.Location(), ErrLeaseLost)
	l.mu.Unlock()
	rec.Seq++
	rec.Released = true
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	for range leaseAttempts {
		_, conflict, werr := s.writeLease(ctx, body, etag)
		if werr == nil && !conflict {
			return nil
		}
		cur, rerr := s.readLease(ctx)
		switch {
		case rerr != nil:
			return fmt.Errorf("state %s: release the lease: %w", s.Location(), errors.Join(werr, rerr))
		case cur == nil || !cur.parsed || cur.rec.Run != rec.Run || bytes.Equal(cur.body, body):
			return nil // another run's, or released
		}
		etag = cur.etag // a renewal cut off by the stop wrote it
	}
	return fmt.Errorf("state %s: release the lease: it kept changing", s.Location())
}

// Close implements io.Closer: Release, bounded by 10 s. A nil error means
// what it means for Release.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), leaseCloseTimeout)
	defer cancel()
	return s.Release(ctx)
}
