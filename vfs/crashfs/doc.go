// Package crashfs is an in-memory [vfs.FS] that can simulate a power loss.
//
// It is a test filesystem in the spirit of pebble's crashable MemFS: it
// keeps, for every file, the data written and the data made durable by
// File.Sync, and, for every directory, the live entries and the entries made
// durable by SyncDir. [FS.CrashClone] builds a new, independent filesystem
// holding what a disk could contain after the machine lost power at that
// instant: everything that was made durable, plus a seeded random share of
// what was not.
//
// # Paths
//
// Names are slash-separated and cleaned with path/filepath. Relative names
// are taken relative to the root, so "out/a" and "/out/a" are the same file.
// The root "/" always exists and is durable. There are no symbolic links,
// hard links, permissions or owners; modes are recorded only for Stat.
//
// # Semantics
//
// The filesystem follows the POSIX rules that the [vfs.FS] contract names:
// Create is exclusive (fs.ErrExist), RenameNoReplace never replaces an
// entry (fs.ErrExist), Remove removes a file or an empty directory, a File
// stays usable after its name was renamed or removed, a file made by Create
// is open for reading and writing at a file offset (a write past the end
// fills the gap with zeros, Truncate does not move the offset), every write
// to a file opened with OpenAppend goes to its current end, a file opened
// with Open is read-only. Errors are *fs.PathError (or *os.LinkError for
// RenameNoReplace) wrapping a syscall.Errno such as ENOENT, EEXIST,
// ENOTEMPTY, ENOTDIR or EISDIR, so errors.Is works with the fs.Err*
// sentinels exactly as with the operating system. It is stricter than Linux
// in one respect: SyncDir of a regular file fails with ENOTDIR.
//
// # Crash model
//
// The model is that of a journaling filesystem with one journal per file and
// one per directory, each committed in order:
//
//   - File data. Every write and truncate after the last successful
//     File.Sync of a file is kept, in order, as its pending operations. A
//     crash keeps the synced data and then applies a prefix of the pending
//     operations; the first operation not kept, if it is a write, may be
//     torn: only a prefix of its bytes survives. So a file after a crash is
//     its synced content, or its content at some moment after that sync
//     (possibly ending in a partial write); it never holds a byte that was
//     not written to it, and data synced and not since overwritten or
//     truncated is never lost. Sync makes every pending operation durable.
//   - Directory entries. Every create, mkdir, remove and rename in a
//     directory after its last SyncDir is kept, in order, as the
//     directory's pending changes. A crash keeps the synced entries and
//     applies a prefix of the pending changes. A file or directory whose
//     entry was never made durable by SyncDir of its parent may therefore
//     vanish (with everything in it), a removal or rename not followed by
//     SyncDir may be undone, and a removed file may come back with its
//     synced data.
//   - Renames are atomic. A rename is one change, recorded in both the old
//     and the new parent: a crash applies it in both or in neither, so the
//     file is found under exactly one of its names (this is what a
//     journaling filesystem guarantees; it is more than POSIX promises).
//     SyncDir of either directory makes the rename durable, and with it
//     every earlier pending change of the other directory. The same holds
//     for directory renames.
//   - Directories and files are independent: syncing a file does not make
//     its name durable, and syncing a directory does not make a file's data
//     durable.
//
// For each file and each directory with pending changes, [FS.CrashClone]
// chooses with equal probability to keep none of them, all of them, or a
// random prefix; when a file keeps not all of its pending operations, the
// first one left out, if a write, survives in part with probability 1/2.
// The choice is driven only
// by the seed and the state of the filesystem, so the same seed on the same
// state gives the same clone. [FS.CrashCloneSynced] keeps exactly the
// durable state, which makes it the deterministic worst case.
//
// A clone shares nothing with the filesystem it came from: files opened on
// the original keep working on the original and never change the clone. In
// the clone everything is durable.
//
// # Concurrency
//
// An FS and all its files are guarded by one mutex, so every method of the
// FS and of its files is safe for concurrent use, CrashClone included (it
// sees the state between two operations). As the vfs contract says, callers
// should still use one File from one goroutine at a time.
package crashfs
