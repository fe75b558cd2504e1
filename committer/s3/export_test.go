package s3

import s3api "github.com/aws/aws-sdk-go-v2/service/s3"

// Exported for the external tests of this directory (package s3_test).

// MinIO credentials of the test server.
const (
	MinioUser     = minioUser
	MinioPassword = minioPassword
)

// RequireMinioForTest is requireMinio.
var RequireMinioForTest = requireMinio

// MinioClientForTest returns a client of srv.
func MinioClientForTest(srv *minioServer) *s3api.Client { return srv.Client() }
