// Package kafka is a filesink source that reads Kafka topics with
// franz-go, exactly once, by keeping its offsets in the pipeline's
// checkpoints.
//
// Open a [Source] with [Open] (a [Config] and a position) or parse the CLI
// form with [ParseURI]:
//
//	kafka://HOST:PORT[,HOST:PORT]/TOPIC[,TOPIC2][?partitions=0,1&start=earliest|latest|TIME&bounded=true&monitor_group=G]
//
// # Exactly-once: offsets live in the checkpoint
//
// The source does not join a consumer group and never reads committed group
// offsets. It consumes the partitions directly at the offsets of its
// position, the JSON document returned by Position:
//
//	{"v":1,"start":"earliest","bounded":true,
//	 "partitions":[{"topic":"t","partition":0,"next":42,"end":100}, ...]}
//
// "next" is, per partition, the offset after the last record Next returned
// (and after any transaction markers and aborted records that followed it).
// The pipeline stores the position in checkpoint record N; a restart from
// checkpoint N opens the source with it and reads exactly the records after
// the ones the checkpoint covers: no duplicates, no gaps. A position that
// no longer matches the cluster (other topics, a partition gone, records
// deleted by retention, a topic recreated) is an error matching
// source.ErrInputChanged, never a silent restart.
//
// [Source.CommitToGroup] may copy a decided checkpoint's offsets to a
// consumer group so that lag monitoring sees them; the group is for
// monitoring only and is never read back.
//
// # Group mode: lanes
//
// [JoinGroup] makes this process a member of a consumer group
// (cooperative-sticky) that shares the partitions of the topics among
// processes. Each partition assigned to the member is a lane with its own
// [LaneSource]. A [Handler] gets each assignment (Assigned, inside franz-go's
// OnPartitionsAssigned, with the group generation) and returns each lane's
// position, a lane position document ([EncodeLanePosition],
// [LanePosition]: the position document with one partition); fetching
// starts exactly there (AdjustFetchOffsetsFn), never at the group's
// committed offset, which [Group.CommitLane] only sets for lag dashboards.
// A lane the Handler leaves out is not fetched. Revoked and Lost stop the
// lanes, with and without a final checkpoint. [Group.Run] polls with
// BlockRebalanceOnPoll and hands each lane its records; a full lane is
// paused and rewound rather than waited for, so a slow lane holds up
// neither the others nor a rebalance. [Group.FirstPositions] resolves the
// start (and, bounded, the end) of lanes that have no state yet.
//
// # read_committed
//
// Records are fetched with read_committed isolation: records of aborted
// transactions and transaction markers are never returned, and nothing at
// or after the last stable offset (the first offset of a transaction still
// open) is returned until that transaction is decided. An open transaction
// therefore holds the source back, as it holds every read_committed
// consumer. Markers and aborted records still take offsets; the source
// keeps control records from the client so that its position moves past
// them.
//
// # First start
//
// Without a position the source resolves Config.Start once, to an offset
// per partition: "earliest" (the log start), "latest" (the last stable
// offset) or a time (the first record with a timestamp at or after it). The
// offsets, and the start as resolved, go into the position, so a restart
// before any record was read starts at the same place.
//
// # Bounded mode
//
// With Config.Bounded the source also lists each partition's last stable
// offset at the first start and keeps it in the position as "end". Next
// returns the committed records below the ends and then io.EOF, on the first
// run and on every restart alike, however many records were produced
// since. Partitions that were empty, or whose start is at or past their
// end, are done at once. A partition whose last records below its end are
// aborted, with the abort marker past the end, is recognised as done by a
// direct fetch after a short idle time.
//
// Partitions added to a topic after the first start are ignored in bounded
// mode; in unbounded mode a restart reads them from their start. Partitions
// added while a source runs are not picked up until the next restart.
//
// # Records
//
// Record.Value is the Kafka record's value; keys, headers and timestamps are
// not passed on. Record.Origin is "TOPIC/PARTITION:OFFSET", e.g.
// "orders/3:1042".
//
// # Concurrency, memory and errors
//
// A Source is not safe for concurrent use (one goroutine calls Next,
// Position and Close), except CommitToGroup. Record.Value is valid until the
// next Next; Next does not allocate per record. Memory is bounded by the
// fetch size (Config.FetchMaxBytes per broker).
//
// Errors name the topic, partition, offset or brokers: [*UnknownTopicError],
// [*UnreachableError], source.ErrBadPosition for a malformed position,
// source.ErrBadURI for a bad URI. Fetch errors are sticky. Credentials (the
// SASL password, a [Secret]) never appear in errors, logs or Describe.
package kafka
