// Package vfs is the filesystem seam of filesink: every file the local
// backend and the checkpoint store touch goes through an FS, so tests can
// replace the operating system with a crash-simulating or error-injecting
// filesystem.
//
// # Contract
//
// Implementations must follow POSIX semantics for the durability rules that
// filesink relies on:
//
//   - Data written to a File is durable only after File.Sync returns nil.
//   - A directory entry (a file created, renamed or removed in a directory,
//     or a subdirectory made) is durable only after SyncDir of that directory
//     returns nil.
//   - RenameNoReplace is atomic and never replaces an existing entry: if
//     newname exists it must return an error for which
//     errors.Is(err, fs.ErrExist) is true and leave both names untouched.
//   - Create must fail with fs.ErrExist if the name exists.
//   - A failed Sync leaves the file in an unknown state; callers must not
//     retry Sync on the same File (docs/architecture.md, invariant 4).
//
// Paths are slash-separated operating-system paths (absolute or relative).
//
// # Concurrency
//
// FS implementations are safe for concurrent use. A File is not; it is used
// by one goroutine at a time.
package vfs
