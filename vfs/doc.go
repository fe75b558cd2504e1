// Package vfs is the filesystem seam of filesink: every file the local
// backend and the checkpoint store touch goes through an FS, so tests can
// replace the operating system with a crash-simulating or error-injecting
// filesystem. OS is the operating system's filesystem, and the default
// wherever an FS is optional; crashfs (a crash-simulating filesystem) and
// errorfs (an error-injecting one) are the two test filesystems.
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
//     retry Sync on the same File: the kernel may have dropped the dirty
//     pages it could not write, and a second Sync would report success
//     (docs/architecture.md, invariant 4).
//
// Paths are slash-separated operating-system paths (absolute or relative).
//
// # Platforms
//
// OS works on every platform Go supports; Linux is the one filesink is
// tested on. On Linux, RenameNoReplace is renameat2(RENAME_NOREPLACE)
// (link and unlink where the filesystem lacks it) and StartWriteback is
// sync_file_range. Elsewhere RenameNoReplace is link and unlink (a crash
// between the two leaves both names, which recovery resolves like any
// published staging file), StartWriteback does nothing, and on Windows
// SyncDir only checks the directory: Windows cannot fsync a directory, and
// NTFS journals its entries.
//
// # Concurrency
//
// FS implementations are safe for concurrent use. A File is not; it is used
// by one goroutine at a time.
package vfs
