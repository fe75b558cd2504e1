package s3

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
)

const leasePrefix = "out/_filesink"

// leaseNow reads the LEASE object of the store under leasePrefix.
func leaseNow(t *testing.T, client *s3api.Client, bucket string) leaseRecord {
	t.Helper()
	out, err := client.GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &bucket, Key: aws.String(leasePrefix + "/" + LeaseFile)})
	if err != nil {
		t.Fatalf("read the lease: %v", err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r leaseRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("lease %q: %v", b, err)
	}
	return r
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil || h == "" {
		t.Fatalf("hostname: %q, %v", h, err)
	}
	return h
}

func mustAcquire(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { s.Close() })
}

// TestStoreLease: Acquire writes the lease, renews it, Close releases it;
// the lease is not a record; a released store writes no record.
func TestStoreLease(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	s := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(time.Second))
	mustAcquire(t, s)
	first := leaseNow(t, client, bucket)
	if _, err := time.Parse(time.RFC3339, first.Started); err != nil || first.V != 1 || first.Run == "" ||
		first.Host != hostname(t) || first.PID != os.Getpid() || first.TTLms != 1000 || first.Released {
		t.Errorf("lease after Acquire = %+v (started: %v)", first, err)
	}
	if got, want := s.LeaseLocation(), "s3://"+bucket+"/"+leasePrefix+"/LEASE"; got != want {
		t.Errorf("LeaseLocation = %q, want %q", got, want)
	}
	if err := s.Acquire(ctx); err == nil {
		t.Error("a second Acquire of the same store succeeded")
	}
	if ids, err := s.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("List beside the lease = %v, %v; want no records", ids, err)
	}
	if err := s.Put(ctx, sampleCheckpoint(1)); err != nil {
		t.Fatal(err)
	}
	// The renewal goroutine writes the next versions (every third of the
	// TTL).
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for r := first; r.Seq < first.Seq+2; r = leaseNow(t, client, bucket) {
		if r.Run != first.Run || r.Released {
			t.Fatalf("lease while held = %+v; want run %s", r, first.Run)
		}
		select {
		case <-wait.Done():
			t.Fatalf("the lease was never renewed: still %+v", r)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := leaseNow(t, client, bucket); !r.Released || r.Run != first.Run || r.Seq <= first.Seq {
		t.Errorf("lease after Close = %+v; want run %s released", r, first.Run)
	}
	if err := s.Put(ctx, sampleCheckpoint(2)); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Put after Close = %v; want ErrLeaseLost", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if ids, err := s.List(ctx); err != nil || !slices.Equal(ids, []uint64{1}) {
		t.Errorf("List = %v, %v; want [1]", ids, err)
	}
}

// TestStoreLeaseRefused: while a run holds and renews the lease, another
// run (another host, or this host with a live pid) is refused with the
// holder named; after the holder's Close, it takes the lease over at once.
func TestStoreLeaseRefused(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	a := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(time.Second))
	mustAcquire(t, a)
	held := leaseNow(t, client, bucket)
	b := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(time.Second), withLeaseIdentity("other-host", 4242))
	sameHost := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(time.Second))
	for name, s := range map[string]*Store{"other host": b, "same host, live pid": sameHost} {
		err := s.Acquire(ctx)
		var le *LeaseError
		if !errors.Is(err, ErrStateInUse) || !errors.As(err, &le) {
			t.Fatalf("%s: Acquire of a held lease = %v; want a LeaseError", name, err)
		}
		msg := err.Error()
		if le.Host != hostname(t) || le.PID != os.Getpid() || le.Started != held.Started || le.TTL != time.Second ||
			!strings.Contains(msg, a.Location()) || !strings.Contains(msg, "host "+hostname(t)+", pid "+strconv.Itoa(os.Getpid())) ||
			!strings.Contains(msg, "started "+held.Started) || strings.Contains(msg, "\n") {
			t.Errorf("%s: refusal %+v: %q; want the state and the holder named on one line", name, le, msg)
		}
	}
	if r := leaseNow(t, client, bucket); r.Run != held.Run {
		t.Fatalf("the refused runs changed the lease: %+v", r)
	}
	if err := a.Put(ctx, sampleCheckpoint(8)); err != nil {
		t.Errorf("the holder's Put after the refusals: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx); err != nil {
		t.Fatalf("Acquire after the holder released: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if r := leaseNow(t, client, bucket); r.Host != "other-host" || r.PID != 4242 || r.Released || r.Seq <= held.Seq {
		t.Errorf("lease after the takeover = %+v", r)
	}
	if err := b.Put(ctx, sampleCheckpoint(9)); err != nil {
		t.Errorf("the new holder's Put: %v", err)
	}
}

// TestStoreLeaseDeadHolder: a lease whose holder ran on this host and whose
// process is gone is taken over at once, although its TTL (an hour) is far
// from over.
func TestStoreLeaseDeadHolder(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	// A process that has exited (and was reaped): its pid is dead.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	killed := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(MaxLeaseTTL), withLeaseIdentity(hostname(t), dead))
	mustAcquire(t, killed)
	killed.stopRenewing() // as kill -9 would: no renewal, no release
	next := MustNewStore(t, client, bucket, leasePrefix)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := next.Acquire(ctx); err != nil {
		t.Fatalf("Acquire over the lease of dead pid %d on this host: %v", dead, err)
	}
	t.Cleanup(func() { next.Close() })
	if r := leaseNow(t, client, bucket); r.PID != os.Getpid() || r.Released {
		t.Errorf("lease after the takeover = %+v; want this process's", r)
	}
}

// TestStoreLeaseStale: a holder that stops renewing (frozen, cut off) loses
// its lease once it stayed unchanged for a TTL; its next Put fails with
// ErrLeaseLost naming the new holder and writes nothing.
func TestStoreLeaseStale(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	zombie := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(ttl))
	mustAcquire(t, zombie)
	zombie.stopRenewing()
	other := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(ttl), withLeaseIdentity("other-host", 4242))
	if err := other.Acquire(ctx); err != nil {
		t.Fatalf("Acquire over a lease nobody renews: %v", err)
	}
	t.Cleanup(func() { other.Close() })
	err := zombie.Put(ctx, sampleCheckpoint(1))
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), zombie.Location()) ||
		!strings.Contains(err.Error(), "host other-host, pid 4242") {
		t.Fatalf("Put of the fenced holder = %v; want ErrLeaseLost naming the state and the new holder", err)
	}
	if err := zombie.Delete(ctx, 1); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Delete of the fenced holder = %v; want ErrLeaseLost", err)
	}
	if err := zombie.SetJobID(ctx, "fs-zombie"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("SetJobID of the fenced holder = %v; want ErrLeaseLost", err)
	}
	if ids, err := other.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("records after the fenced Put: %v, %v; want none", ids, err)
	}
	if id, err := other.JobID(ctx); id != "" || err != nil {
		t.Errorf("job id after the fenced SetJobID: %q, %v; want none", id, err)
	}
	if err := zombie.Close(); err != nil {
		t.Errorf("Close of the fenced holder: %v", err)
	}
	if r := leaseNow(t, client, bucket); r.Host != "other-host" || r.Released {
		t.Errorf("the fenced holder's Close changed the new holder's lease: %+v", r)
	}
	if err := other.Put(ctx, sampleCheckpoint(1)); err != nil {
		t.Errorf("the new holder's Put: %v", err)
	}
}

// TestStoreLeaseRenewsBeforePut: a holder whose renewals stopped (a pause)
// and whose lease nobody took renews it before it writes a record.
func TestStoreLeaseRenewsBeforePut(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	s := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(ttl))
	mustAcquire(t, s)
	s.stopRenewing()
	before := leaseNow(t, client, bucket)
	time.Sleep(ttl) // past the safe two thirds of the TTL
	if err := s.Put(ctx, sampleCheckpoint(1)); err != nil {
		t.Fatalf("Put after a pause: %v", err)
	}
	if r := leaseNow(t, client, bucket); r.Run != before.Run || r.Seq <= before.Seq {
		t.Errorf("lease after the Put = %+v; want it renewed from seq %d", r, before.Seq)
	}
}

// TestStoreCheckLease: CheckLease is nil while the store holds its lease,
// and once another run took it over (a paused holder's renewals missed),
// the lease-lost error naming the new holder, even before the holder's
// own renewal noticed.
func TestStoreCheckLease(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	if err := MustNewStore(t, client, bucket, leasePrefix).CheckLease(ctx); err != nil {
		t.Errorf("CheckLease of a store that holds no lease: %v", err)
	}
	zombie := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(ttl))
	mustAcquire(t, zombie)
	if err := zombie.CheckLease(ctx); err != nil {
		t.Fatalf("CheckLease of the holder: %v", err)
	}
	zombie.stopRenewing()
	other := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(ttl), withLeaseIdentity("other-host", 4242))
	if err := other.Acquire(ctx); err != nil {
		t.Fatalf("Acquire over a lease nobody renews: %v", err)
	}
	t.Cleanup(func() { other.Close() })
	err := zombie.CheckLease(ctx)
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "host other-host, pid 4242") {
		t.Fatalf("CheckLease of the holder taken over = %v; want ErrLeaseLost naming the new holder", err)
	}
	if err := other.CheckLease(ctx); err != nil {
		t.Errorf("CheckLease of the new holder: %v", err)
	}
}

// TestStoreLeaseHolder: Holder reads the lease without taking it: none
// before any run, the holder's name while a run holds and renews it
// (and the holder keeps it), none once it is released, once the store has
// not seen it renewed for more than a TTL, or when its holder is a process
// of this host that is gone.
func TestStoreLeaseHolder(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	ctx := t.Context()
	bucket := srv.NewBucket(t)
	reader := MustNewStore(t, client, bucket, leasePrefix)
	if h, err := reader.Holder(ctx); h != nil || err != nil {
		t.Fatalf("Holder without a lease = %v, %v; want nil, nil", h, err)
	}
	a := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(time.Second), withLeaseIdentity("other-host", 4242))
	mustAcquire(t, a)
	held := leaseNow(t, client, bucket)
	h, err := reader.Holder(ctx)
	if err != nil || h == nil || h.Host != "other-host" || h.PID != 4242 || h.Started != held.Started || h.TTL != time.Second {
		t.Fatalf("Holder of a held lease = %+v, %v; want other-host, pid 4242, started %s", h, err, held.Started)
	}
	if got, want := h.String(), "host other-host, pid 4242, started "+held.Started; got != want {
		t.Errorf("holder = %q; want %q", got, want)
	}
	if err := a.Put(ctx, sampleCheckpoint(1)); err != nil {
		t.Errorf("the holder's Put after Holder: %v", err)
	}
	// Frozen: the lease stays, unrenewed, and the store's clock goes on,
	// past the TTL and the second of slack, read on a clock of whole
	// seconds.
	a.stopRenewing()
	time.Sleep(3*time.Second + 200*time.Millisecond)
	if h, err := reader.Holder(ctx); h != nil || err != nil {
		t.Errorf("Holder of a lease not renewed for three TTLs = %+v, %v; want nil, nil", h, err)
	}

	bucket = srv.NewBucket(t)
	reader = MustNewStore(t, client, bucket, leasePrefix)
	b := MustNewStore(t, client, bucket, leasePrefix)
	mustAcquire(t, b)
	if h, err := reader.Holder(ctx); err != nil || h == nil || h.PID != os.Getpid() || h.Host != hostname(t) {
		t.Fatalf("Holder of a lease held by this process = %+v, %v", h, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if h, err := reader.Holder(ctx); h != nil || err != nil {
		t.Errorf("Holder of a released lease = %+v, %v; want nil, nil", h, err)
	}

	bucket = srv.NewBucket(t)
	reader = MustNewStore(t, client, bucket, leasePrefix)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	killed := MustNewStore(t, client, bucket, leasePrefix, WithLeaseTTL(MaxLeaseTTL), withLeaseIdentity(hostname(t), cmd.Process.Pid))
	mustAcquire(t, killed)
	killed.stopRenewing()
	if h, err := reader.Holder(ctx); h != nil || err != nil {
		t.Errorf("Holder of a lease of dead pid %d on this host = %+v, %v; want nil, nil", cmd.Process.Pid, h, err)
	}
}
