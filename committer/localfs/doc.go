// Package localfs is the local-filesystem backend of the file sink: a
// recoverable in-progress file per part, published by a no-clobber rename.
//
// # Layout
//
// A part published as "bucket/part-0-1a2b3c4d-7.jsonl" is written first to the
// hidden staging file "bucket/.part-0-1a2b3c4d-7.jsonl.inprogress" beside it.
// Finished output never has a component starting with '.' or '_'.
//
// # Durability
//
//   - Persist and CloseForCommit fsync the staging file, and the directory
//     once after the file was created, before returning the length that a
//     checkpoint records. A failed fsync breaks the writer: it is never
//     retried on the same descriptor.
//   - Between checkpoints a part writer asks the kernel to start writing
//     back every MiB written, and fsyncs every 16 MiB on a goroutine of
//     its own, so that a checkpoint's fsync has little left to do. These
//     early fsyncs promise nothing (only a checkpoint's length counts), but
//     their failure breaks the writer too.
//   - Direct I/O (WithDirectIO, off by default, Linux): a part writer that
//     receives writes of 256 KiB or more gathers them in a 1 MiB aligned
//     buffer and writes it with O_DIRECT, from memory to the device
//     without the page cache; the bytes before the file's next 4 KiB
//     boundary, smaller writes and the last partial block at a persist go
//     through the page cache. Persist and CloseForCommit write the buffer
//     out before their fsync, so a recorded length covers the same bytes
//     as without it. A full buffer is written on a goroutine of its own
//     while the writer fills a second one. At most 8 writers of a backend
//     hold buffers at once; a filesystem that refuses O_DIRECT turns it
//     off for the backend.
//   - Commit renames with renameat2(RENAME_NOREPLACE) (link+unlink where the
//     filesystem lacks it), never os.Rename, then fsyncs the directory.
//   - Resume truncates the staging file to the recorded length; a shorter
//     file is ErrDataLoss.
//   - Commit is verified: staging gone and target present with the recorded
//     length is "already committed"; staging and target both gone is
//     ErrDataLoss; a target with other content is ErrAlreadyExists.
//   - Sweep deletes only hidden ".<namespace>*.inprogress" files that no
//     retained checkpoint references.
//
// # Concurrency
//
// A Backend is safe for concurrent use; a part writer is not.
package localfs
