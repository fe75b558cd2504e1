package filesink

import "time"

// PartInfo describes an in-progress part file to a rolling policy.
type PartInfo struct {
	Bucket    string
	Created   time.Time // when the part received its first record
	LastWrite time.Time // when the part received its latest record
	Size      int64     // bytes written or buffered so far
}

// RollingPolicy decides when an in-progress part file is closed and becomes
// pending. Implementations must be safe for use by one goroutine at a time.
type RollingPolicy interface {
	// OnCheckpoint reports whether the part rolls at a checkpoint.
	OnCheckpoint(p PartInfo) bool
	// OnEvent reports whether the part rolls before a record of n encoded
	// bytes is added.
	OnEvent(p PartInfo, n int) bool
	// OnTime reports whether the part rolls at processing time now.
	OnTime(p PartInfo, now time.Time) bool
}

// Policy defaults, from Flink's DefaultRollingPolicy.
const (
	DefaultPartSize   = 128 << 20
	DefaultRollover   = 60 * time.Second
	DefaultInactivity = 60 * time.Second
)

// DefaultPolicy rolls a part when it reaches PartSize bytes, when it is older
// than Rollover, or when it had no record for Inactivity. A zero field
// disables that condition. It does not roll at checkpoints: in-progress parts
// are persisted and resumed.
type DefaultPolicy struct {
	PartSize   int64
	Rollover   time.Duration
	Inactivity time.Duration
}

// NewDefaultPolicy returns the policy with Flink's defaults: 128 MiB, 60 s,
// 60 s.
func NewDefaultPolicy() DefaultPolicy {
	return DefaultPolicy{PartSize: DefaultPartSize, Rollover: DefaultRollover, Inactivity: DefaultInactivity}
}

// OnCheckpoint implements RollingPolicy.
func (DefaultPolicy) OnCheckpoint(PartInfo) bool { return false }

// OnEvent implements RollingPolicy.
func (d DefaultPolicy) OnEvent(p PartInfo, n int) bool {
	return d.PartSize > 0 && p.Size > 0 && p.Size+int64(n) > d.PartSize
}

// OnTime implements RollingPolicy.
func (d DefaultPolicy) OnTime(p PartInfo, now time.Time) bool {
	return (d.Rollover > 0 && now.Sub(p.Created) >= d.Rollover) ||
		(d.Inactivity > 0 && now.Sub(p.LastWrite) >= d.Inactivity)
}

// OnCheckpointPolicy rolls every part at every checkpoint, and also on size
// when PartSize > 0 (what bulk formats need).
type OnCheckpointPolicy struct {
	PartSize int64
}

// OnCheckpoint implements RollingPolicy.
func (OnCheckpointPolicy) OnCheckpoint(PartInfo) bool { return true }

// OnEvent implements RollingPolicy.
func (o OnCheckpointPolicy) OnEvent(p PartInfo, n int) bool {
	return o.PartSize > 0 && p.Size > 0 && p.Size+int64(n) > o.PartSize
}

// OnTime implements RollingPolicy.
func (OnCheckpointPolicy) OnTime(PartInfo, time.Time) bool { return false }
