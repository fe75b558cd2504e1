package s3

import (
	"os"
	"testing"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/internal/testutil/miniotest"
)

// minio is the package's MinIO server, started on first use.
var minio miniotest.Pool

func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }

// requireMinio returns the shared server; without MinIO the test skips
// loudly, or fails when CI=true.
func requireMinio(t testing.TB) *miniotest.Server {
	t.Helper()
	return minio.Shared(t)
}

// withRetryer gives a test client the bounded retryer of this package.
func withRetryer(o *s3api.Options) { o.Retryer = NewRetryer() }
