//go:build !unix

package filesink

// openFileLimit reports that the platform has no limit of open
// descriptors to read: DefaultMaxOpenParts is FixedMaxOpenParts.
func openFileLimit() (uint64, bool) { return 0, false }
