// Package testutil holds nothing itself: its sub-packages are the test
// harnesses, imported by tests only (internal/layout checks it):
// miniotest (a throwaway MinIO server per test package), mariadbtest (the
// machine's MariaDB and private mariadbd processes for kill -9 cases),
// kafkatest (kfake brokers, in process and as processes), faultproxy (an
// HTTP proxy that injects S3 faults in front of MinIO), icebergtest (an
// Iceberg table reader that does not use iceberg-go), icebergrest (an
// Iceberg REST catalog server whose commits can lose their reply or
// conflict), testjob (small jobs and output checks for crash tests) and
// proc (the process supervisor the others share).
package testutil
