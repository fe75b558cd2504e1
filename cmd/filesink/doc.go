// Command filesink moves records from a replayable source (files, Kafka)
// into part files, S3 objects, Apache Iceberg tables or MySQL rows, exactly
// once, even when killed at any instant; or to HTTP endpoints, at least
// once (with idempotency keys) or at most once.
//
//	filesink run    --source URI --sink URI [flags]   run a job (resumes after a crash)
//	filesink verify --sink URI [--state DIR]          check output against checkpoints
//	filesink state  --state DIR                       print the checkpoint records
//	filesink compact --sink iceberg://NS.TABLE --warehouse LOCATION  rewrite small data files
//	filesink uploads list|abort --sink s3://B/P       incomplete uploads of an S3 sink
//	filesink xa list|commit|rollback --sink mysql://DSN  prepared XA branches of a MySQL sink
//
// Run "filesink COMMAND --help" for the flags of a command.
package main
