// Package miniotest starts real MinIO servers for tests of the S3 backend.
//
// MinIO is installed once per machine by scripts/minio (make test runs it and
// exports FILESINK_MINIO). Binary looks for the server in this order: the
// FILESINK_MINIO environment variable, the cache path
// ${FILESINK_CACHE:-$HOME/.cache/filesink}/bin/minio, then minio on PATH.
// If none is found a test skips with a loud reason when run by hand, and
// fails when CI=true: a green CI must mean the S3 tests ran.
//
// Each server runs as a child process on 127.0.0.1 with a free port, a
// temporary data dir, fixed root credentials (AccessKey, SecretKey) and the
// region us-east-1; it is stopped (SIGTERM, then SIGKILL) when its owner is
// done, and it dies with the test binary (Linux parent-death signal).
//
// # Usage
//
// One server per test binary is enough for most tests: the test package owns
// a Pool, which starts a server on first use, and stops it from TestMain.
// Every test gets its own bucket:
//
//	var minio miniotest.Pool
//
//	func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }
//
//	func TestPut(t *testing.T) {
//		srv := minio.Shared(t)
//		bucket := srv.NewBucket(t)
//		client := srv.Client(t)
//		...
//	}
//
// Tests that kill or restart MinIO (Kill, Stop, Restart) must start a private
// server with Start(t), which is stopped by t.Cleanup; never kill the shared
// one. To inject faults between the client and MinIO, put an
// internal/testutil/faultproxy in front of the server and point a client at it with
// ClientAt(t, proxy.URL()).
package miniotest
