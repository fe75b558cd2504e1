// Package internal holds test and support code that is not part of
// filesink's API: vfs (the filesystem seam, with crashfs, a crash-simulating
// filesystem, and errorfs, an error-injecting one), jsonscan (a fast JSON
// validator), testjob (small jobs and output checks for crash tests),
// miniotest (a throwaway MinIO server per test package) and faultproxy (an
// HTTP proxy that injects S3 faults in front of it).
package internal
