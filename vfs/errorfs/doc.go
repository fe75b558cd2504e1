// Package errorfs wraps a [vfs.FS] to count its operations and inject
// errors into them, in the spirit of pebble's errorfs.
//
// # Operations
//
// Every call of an FS method (Create, OpenAppend, Open, Stat, Remove,
// RenameNoReplace, Mkdir, ReadDir, SyncDir) and of a method of a File it
// returned (Write, Read, ReadAt, Sync, Truncate, Close, Stat) is one
// operation, described by an [Op]. Before the operation reaches the wrapped
// filesystem, the [FS]:
//
//  1. counts it, if it passes the filter (see [WithFilter]; without one
//     every operation counts), and sets Op.Index to its 1-based number
//     among the counted operations (0 if it is not counted);
//  2. asks the [Injector] whether it should fail. If the injector returns
//     an error the operation is not performed (except Close, which still
//     closes the wrapped file so nothing leaks) and the caller gets that
//     error wrapped in an *fs.PathError (an *os.LinkError for
//     RenameNoReplace), so errors.Is(err, ErrInjected) holds for the
//     injectors of this package. Reads and writes that fail report 0 bytes.
//
// The errors of this package's injectors never match fs.ErrNotExist,
// fs.ErrExist or io.EOF, so code under test cannot mistake them for an
// expected condition.
//
// # Crash loops
//
// [OnIndex](k) fails the k-th counted operation and every operation after it,
// counted or not: from that point on the process is dead, as if the machine
// crashed just before operation k. A crash-point test runs the workload
// with OnIndex(k) for k = 1, 2, ... over a crash-simulating filesystem
// (vfs/crashfs), takes a crash clone after each run, recovers on
// it and checks its invariants, and stops at the first k for which
// [FS.Fired] reports false: the workload then completed without a fault.
// [FS.Ops] gives the number of counted operations of a run.
//
// # Concurrency
//
// An FS is safe for concurrent use if the wrapped filesystem is; its
// counters are atomic. With concurrent callers the numbering of operations
// follows the order in which they reach the counter. Injectors must be safe
// for concurrent use; those of this package are. An injector made by
// OnIndex keeps state and belongs to one FS (one run).
package errorfs
