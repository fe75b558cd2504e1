// Package internal holds code that is not part of filesink's API:
// jsonscan (a fast JSON validator and string scanner, used by the sinks)
// and, under testutil, the test harnesses: testjob (small jobs, crash loops
// and output checks), miniotest (throwaway MinIO servers), faultproxy (an
// HTTP proxy that injects S3 faults in front of MinIO), mariadbtest (the
// shared MariaDB and private mariadbd servers) and kafkatest (kfake
// brokers). The filesystem seam and its test filesystems are the public
// package vfs.
package internal
