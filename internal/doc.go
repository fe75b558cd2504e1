// Package internal holds test and support code that is not part of
// filesink's API: vfs (the filesystem seam, with crashfs, a crash-simulating
// filesystem, and errorfs, an error-injecting one), jsonscan (a fast JSON
// validator), and testjob (small jobs and output checks for crash tests).
package internal
