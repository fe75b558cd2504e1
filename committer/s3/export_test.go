package s3

import (
	"testing"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/filesink/filesink/internal/testutil/miniotest"
)

// Exported for the external tests of this directory (package s3_test).

// MustNewStore is NewStore, failing tb on an error.
func MustNewStore(tb testing.TB, client *s3api.Client, bucket, prefix string, opts ...Option) *Store {
	tb.Helper()
	s, err := NewStore(client, bucket, prefix, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// RequireMinioForTest returns the package's shared MinIO server.
func RequireMinioForTest(t testing.TB) *miniotest.Server { return requireMinio(t) }

// withLeaseIdentity makes a store's lease name this host and pid instead
// of the process's own (a holder on another host, or a dead process).
func withLeaseIdentity(host string, pid int) Option {
	return optionFunc(func(o *options) { o.leaseHost, o.leasePID = host, pid })
}

// stopRenewing stops the renewals of s's lease and keeps it held, as a
// frozen or cut-off process would.
func (s *Store) stopRenewing() {
	s.lease.mu.Lock()
	stop, done := s.lease.stop, s.lease.done
	s.lease.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}
