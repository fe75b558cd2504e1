// Command filesink moves records from a replayable source into part files,
// exactly once, even when killed at any instant.
//
//	filesink run    --source URI --sink URI [flags]   run a job (resumes after a crash)
//	filesink verify --sink URI [--state DIR]          check output against checkpoints
//	filesink state  --state DIR                       print the checkpoint records
//
// Run "filesink COMMAND --help" for the flags of a command.
package main
