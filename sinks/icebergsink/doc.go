// Package icebergsink writes Apache Iceberg tables exactly once: the file
// sink's Parquet parts, written with the table's field ids under the
// table's location, become one append snapshot per checkpoint.
//
// A Participant wraps a filesink.Writer: phase 1 and phase 2 are the
// writer's (each Parquet part is durable at its checkpoint and visible at
// its final path once the checkpoint is decided), and its
// CommittedCheckpoint appends the checkpoint's files to the table through
// a Committer, which gathers the lanes that wait at the same time into one
// snapshot (committer/iceberg's Table.Commit: a compare-and-swap on the
// table head, deduplicated per job and lane). A data file no snapshot
// references is invisible to readers of the table.
//
// Schema converts the schema document of --schema into the table's
// schema, and the table's schema back into the one the Parquet writer
// uses (the table's field ids). Partitioning maps --bucket to the table's
// partition spec and computes each file's partition values from its
// records.
package icebergsink
