// Package s3 publishes the file sink's part files to S3 and S3-compatible
// stores (AWS S3, MinIO) exactly once: a driver.Backend in which every
// in-progress part file is a recoverable multipart upload, published by
// CompleteMultipartUpload, and a recovery.Store that keeps checkpoint
// records as objects. It follows Flink's S3 RecoverableWriter and avoids
// its known bugs (tail objects deleted on restore, FLINK-13940; uploads a
// checkpoint references aborted, FLINK-40595).
//
// # Layout
//
// A Backend owns one prefix of a bucket (New(client, bucket, prefix)).
// Relative to s3://BUCKET/PREFIX/:
//
//	DIR/NAME                                      a published part file (target DIR/NAME)
//	_filesink-staging/DIR/.NAME.upload            upload marker of the target
//	_filesink-staging/DIR/.NAME.tail-<16 hex>     a tail object of the target
//	_filesink/ckpt-<20-digit id>                  checkpoint records (the CLI's default
//	                                              state location; any prefix works)
//	_filesink/LEASE                               the lease of the run that holds the
//	                                              state (Store.Acquire)
//	_filesink/lanes/<topic>/<partition>/HEAD      group mode: a lane's owner epoch and
//	                                              newest checkpoint (LaneStore)
//
// The multipart upload of target DIR/NAME is created on its final key, so
// nothing is visible under that key before CompleteMultipartUpload. Staging
// objects live under a directory whose name starts with '_', which Hadoop,
// Spark, Hive and the file sink's own readers skip. Describe names the
// staging data of a part file "_filesink-staging/DIR/.NAME" (StagingName),
// for its resumables and its pending alike, and Scan lists the same names.
//
// The upload marker, written with If-None-Match: * before the upload is
// created, makes Open exclusive (a second Open of the target fails with
// committer.ErrAlreadyExists) and lets Sweep find every upload this backend
// created: MinIO's ListMultipartUploads only lists the uploads of one exact
// key (a prefix lists nothing), so uploads cannot be found by prefix there.
// An upload whose marker is gone (a paused writer created it after a sweep
// had deleted the marker of an upload not yet there) is still found: Sweep
// lists every upload of the bucket, and keeps those under the prefix, when
// the prefix lists none.
//
// # Writing
//
// A part writer spills the bytes of the part it is filling to a local file
// in the spill directory (WithSpillDir; the file is unlinked at once, so it
// never outlives the process) and computes their CRC-32 on the way. Each
// full part (WithPartSize, default 16 MiB, at least 5 MiB: S3 and MinIO
// reject a smaller non-last part at CompleteMultipartUpload) is uploaded in
// the background; at most WithConcurrency (default 4) uploads per writer run
// at once and Write blocks beyond that, so a writer holds at most
// concurrency+1 parts on disk and a small buffer in memory. Released spill
// files are overwritten for the next parts of the backend's writers (at
// most concurrency+1 kept per backend, until Backend.Close): a writer
// after a roll reuses its predecessor's files and their page cache. Part numbers,
// ETags, sizes and CRC-32s are recorded in order. Over plain HTTP on Linux a
// part or tail object is sent from its spill file by the kernel (sendfile,
// through a fresh descriptor per attempt) instead of being read into the
// process and written to the socket; over TLS the bytes pass through the
// process.
//
// A checkpoint's persist runs in two steps (driver.PartWriter.PersistAsync): at
// the barrier, PersistAsync starts making the bytes written so far durable
// and returns at once, and the writer goes on spilling and uploading the
// next bytes; the function it returns waits until the barrier's bytes are
// in the store (every part started before the barrier uploaded, the tail
// object written) and returns the resumable. Persist does both in a row.
// Bytes after the last part are made durable
//
//   - from 5 MiB on, as a part (a part's bytes go up once, a tail's go up
//     again inside a later part), unless it is the last part the upload may
//     have;
//   - else as tail objects: the bytes written since the last persist go to
//     a new tail object (a delta), and the resumable lists the tail objects
//     in order. Once a part has 8 to 16 deltas (drawn per writer, so that
//     the writers of a sink do not all rewrite at the same checkpoint),
//     the next persist merges them and its own bytes into one object; once
//     it has 8 merged objects, the next merge rewrites the whole tail (below
//     5 MiB) as one. So a checkpoint uploads about what was written since
//     the last one, not the whole tail each time as Flink does, and a
//     resumable lists at most 24 tail objects. Every tail object has a name
//     never used before, so one that an older retained checkpoint
//     references is never replaced; a persist with nothing written since
//     writes nothing.
//
// CloseForCommit waits the same way and uploads the remaining bytes as the
// last part, which may be smaller than 5 MiB.
//
// A part file has at most 10,000 parts (WithMaxParts lowers that: group
// mode keeps writers at 9,999, tests lower it further). The writer's MustRoll (driver.PartWriter) turns true while the last allowed part is being filled, and the file sink rolls the
// part file; bytes written to that part before the roll make it grow past
// the part size (up to S3's 5 GiB per part).
//
// # Finalizing a part another process may still write
//
// Finalize (group mode: a lane's new owner) turns a resumable into a
// pending without resuming the upload: the recorded parts, plus the
// recorded tail bytes read from the tail objects and uploaded as part
// 10,000, which no writer capped at 9,999 parts ever uses. Whatever the
// process that lost the part uploads later is never completed: its own
// completion finds the upload gone, or its checkpoint is fenced first. The
// pending lists the tail objects it was made from (drop), which the
// commit deletes once the file is published.
//
// # Empty part files
//
// A part file with no bytes is published as an empty object, as the local
// file system backend publishes an empty file: CloseForCommit uploads one
// empty part (CompleteMultipartUpload needs at least one) and Commit
// completes the upload like any other, with the same verification.
//
// # Records
//
// Persist returns a resumable, CloseForCommit a pending, both JSON objects:
//
//	{"kind":"resumable","target":"DIR/NAME","key":"PREFIX/DIR/NAME","upload_id":"...",
//	 "id":"<16 hex>","parts":[{"number":1,"etag":"\"...\"","size":16777216,"crc32":"..."}],
//	 "bytes_in_parts":16777216,
//	 "tail":[{"key":"PREFIX/_filesink-staging/DIR/.NAME.tail-<16 hex>","length":1234,"crc32":"..."}],
//	 "tail_length":1234,"length":16778450}
//
//	{"kind":"pending","target":"DIR/NAME","key":"PREFIX/DIR/NAME","upload_id":"...",
//	 "id":"<16 hex>","parts":[...],"bytes_in_parts":16778450,"length":16778450}
//
// "id" is a random id of the Open, stored in the object's metadata
// (x-amz-meta-filesink-id); "crc32" is base64 of the big-endian CRC-32 of
// the part or tail object (absent for parts when part checksums are off).
//
// # Durability
//
// An S3 PUT, UploadPart or CompleteMultipartUpload that returned success is
// durable. A nil error from Persist means every part and tail object the
// resumable lists is stored, so it can be resumed after any crash of this
// process. A nil error from CloseForCommit means every byte is in a part of
// the upload. A nil error from Commit means the object is published with
// exactly the recorded parts. A nil error from Store.Put means the record is
// stored.
//
// # Resume
//
// Resume lists the upload's parts (ListParts, paginated) and requires every
// recorded part with its recorded ETag and size, reads the tail objects back
// into a new spill file and checks each one's length and CRC-32, and
// continues at part len(parts)+1. Parts uploaded after the checkpoint have
// higher numbers: the resumed writer overwrites them, and Complete never
// lists them. Tail objects are never deleted on resume (FLINK-13940): a second
// restore from the same checkpoint finds them again. An upload that is gone
// (a lifecycle rule with AbortIncompleteMultipartUpload, or an operator,
// aborted it) is an *UploadGoneError matching committer.ErrDataLoss that
// names the key and the upload and says what to do; a missing, short or
// changed tail object or part is committer.ErrDataLoss naming it.
//
// # Commit, retries and the in-doubt case
//
// Commit sends CompleteMultipartUpload with exactly the recorded parts and
// If-None-Match: *, so a finished object is never overwritten (MinIO and AWS
// S3 honour the header; a store that rejects it as not implemented makes
// the backend check with HEAD before completing, which cannot see a writer
// that creates the object between the two requests). Then:
//
//   - success: published;
//   - NoSuchUpload: the upload is gone, so the object must exist exactly as
//     recorded: its length, the id in its metadata, its ETag computed from
//     the recorded part ETags (hex MD5 of the concatenated binary MD5s, "-",
//     the number of parts) and, with part checksums, its composite CRC-32.
//     A match is success (an earlier attempt completed it); anything else is
//     committer.ErrDataLoss naming the key;
//   - 412 PreconditionFailed: an object has the name. If the upload still
//     exists, it is somebody else's object: committer.ErrAlreadyExists,
//     nothing overwritten, the upload kept for a later attempt. If the
//     upload is gone, it is resolved as NoSuchUpload (MinIO checks the
//     precondition before the upload);
//   - InvalidPart: a recorded part is gone or changed: committer.ErrDataLoss.
//
// With SSE-KMS (and SSE-C) an ETag is not an MD5 of the content: the ETag is
// not compared then, and the length, the id and the checksum decide.
//
// Transient errors are retried by the SDK's retryer (NewRetryer, also used
// by NewClient: at most 10 attempts, exponential backoff with jitter up to
// 20 s, no client-wide retry quota): HTTP 500, 502, 503 SlowDown, 504,
// throttling, timeouts, connection resets and broken connections. Every
// request may be repeated: UploadPart, tail PUTs, deletes and aborts are
// idempotent; a repeated conditional PUT of a marker or checkpoint record
// that finds the object checks that it is the one it wrote; a repeated
// CreateMultipartUpload may leave a second upload, which the marker lets the
// sweep find and abort; a CompleteMultipartUpload that executed although its
// reply was lost is resolved by the verified re-commit above, on retry or
// after a restart. Errors that must not be retried (data loss, another
// object in the way, a malformed record) match committer.IsPermanent.
//
// # Exclusion
//
// A Store keeps a second run off its prefix with a lease (Store.Acquire):
// the object PREFIX/LEASE, written only with If-None-Match: * or If-Match
// on the ETag last read, renewed every third of its TTL (WithLeaseTTL,
// default 30 s), released by Close. Another run takes it over when it was
// released, when its holder ran on the same host and its process is gone,
// or when it stayed unchanged for a TTL on the new run's monotonic clock;
// else Acquire fails with a *LeaseError (ErrStateInUse). Before every
// record it writes, the holder checks that its last renewal started less
// than two thirds of the TTL ago and bounds the write by that; a lease
// found taken over fences the store (ErrLeaseLost). The exclusion assumes
// bounded clock rates and network delays, not synchronized clocks.
//
// In group mode (a job's partitions shared by several processes) the
// store itself fences instead: each lane (topic partition) has a HEAD
// object, PREFIX/lanes/<topic>/<partition>/HEAD, holding its owner epoch
// and its newest checkpoint record, written only with If-None-Match: * or
// If-Match on the ETag last written, its seq one higher at every write (no
// two versions share bytes or an ETag). LaneStore.Acquire takes a lane
// over (epoch+1, refused to an older group generation); a write whose
// outcome is unknown is resolved by reading the HEAD back, and another
// owner's version fences the store (ErrFenced). LaneStore needs no lease.
// SweepEpochs removes the staging data of a lane's older epochs.
//
// # Cleanup
//
// Nothing that a checkpoint may reference is deleted outside Sweep: Close
// never aborts the upload or deletes tail objects (FLINK-40595), Resume
// never deletes the tails it read, and Commit deletes only the upload marker
// (when no other upload of the key exists). Tail objects of committed
// part files stay until Sweep, because an older retained checkpoint may
// reference them.
//
// Sweep(namespace, keep) lists the staging directory and the uploads under
// the prefix, and for every part file whose base name starts with
// namespace: aborts each of its uploads that no entry of keep references,
// deletes each of its tail objects that no entry of keep references, and
// deletes its marker when none of its uploads is kept. Other namespaces,
// other sinks' objects and finished objects are never touched. The file
// sink calls Sweep at recovery; tail objects written during a run are
// removed by the next sweep. ListUploads and AbortUpload serve `filesink
// uploads list|abort`.
//
// Part files should be committed well before a bucket lifecycle rule with
// AbortIncompleteMultipartUpload aborts them: give such a rule an age above
// the longest time a part file stays open plus the longest outage, or none.
//
// # Integrity
//
// See Integrity for the two modes (the SDK's defaults, and fast: checksums
// only where the API requires one and unsigned payloads over TLS, never
// over plain HTTP), and WithPartChecksums for the per-part CRC-32 that the
// writer computes while spilling and the store verifies in both modes.
//
// # Objects
//
// Published objects get the Content-Type of their format (ContentTypeFor;
// compressed files get their compression's media type and no
// Content-Encoding, see WithContentEncoding), and optionally SSE-S3 or
// SSE-KMS, a storage class and tags. Staging objects and checkpoint records
// get the encryption but not the storage class or tags.
//
// # Permissions
//
// The backend needs s3:GetObject, s3:PutObject, s3:DeleteObject,
// s3:ListBucket (without it S3 answers 403 instead of 404 for a missing
// object, and Open fails), s3:ListBucketMultipartUploads,
// s3:ListMultipartUploadParts and s3:AbortMultipartUpload on the prefix,
// s3:PutObjectTagging with WithTags, and kms:GenerateDataKey and kms:Decrypt
// on the key with SSE-KMS. The Store needs the first four.
//
// # Concurrency
//
// Backend and Store methods are safe for concurrent use. A part writer is
// not (the file sink writes to it from one goroutine at a time); its part
// uploads run on goroutines of their own, joined by Persist,
// CloseForCommit and Close. Credentials never appear in logs or errors of
// this package.
package s3
