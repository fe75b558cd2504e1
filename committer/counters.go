package committer

// Counters are a sink's running totals, for monitoring: each field reads
// one total of the sink's life so far, or is nil when the sink does not
// have that count (a Counters{} sink counts none of them). The totals
// never decrease, except OpenParts.
//
// A sink returns the same Counters on every call; the functions stay
// valid until the sink is closed, and after.
type Counters struct {
	// FilesCommitted counts the part files this run's phase 2 published
	// (recovery re-commits are not counted). Safe for concurrent use.
	FilesCommitted func() int64
	// BranchesRolledBack counts the XA branches that Restore and Sweep
	// rolled back. Safe for concurrent use.
	BranchesRolledBack func() int64
	// RecordsAcked counts the records of batches that the receiver
	// acknowledged. Safe for concurrent use.
	RecordsAcked func() int64
	// RecordsDropped counts the records of failed batches that the sink
	// dropped (at-most-once delivery). Safe for concurrent use.
	RecordsDropped func() int64
	// PartsRebuilt counts the part files made again from the source
	// because the store lost their staged data. Safe for concurrent use.
	PartsRebuilt func() int64
	// OpenParts returns the number of part files in progress now. Unlike
	// the others it is NOT safe for concurrent use: call it only on the
	// goroutine that calls the sink's record-writing methods, between
	// them.
	OpenParts func() int64
}
