package s3

import (
	"testing"

	"github.com/filesink/filesink/internal/testutil/miniotest"
)

// Exported for the external tests of this directory (package s3_test).

// RequireMinioForTest returns the package's shared MinIO server.
func RequireMinioForTest(t testing.TB) *miniotest.Server { return requireMinio(t) }
