// Package testjob runs small file-sink jobs on any vfs.FS and checks their
// output, for the in-process crash tests of several packages. Test support
// only.
package testjob
