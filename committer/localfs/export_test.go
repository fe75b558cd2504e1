package localfs

import (
	"errors"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/vfs"
)

// DirectWrites is the number of writes b made with O_DIRECT.
func DirectWrites(b *Backend) int64 { return b.directWrites.Load() }

// DirectOff reports whether b turned direct I/O off (refused by the
// filesystem).
func DirectOff(b *Backend) bool { return b.directOff.Load() }

// RefuseDirect makes setting O_DIRECT on b's files fail, as on a
// filesystem without direct I/O.
func RefuseDirect(b *Backend) {
	b.setDirect = func(f vfs.File, on bool) error {
		if on {
			return errors.New("test: O_DIRECT refused")
		}
		return vfs.SetDirect(f, false)
	}
}

// InDirectMode reports whether pw, a part writer of this package, is in
// direct mode.
func InDirectMode(pw driver.PartWriter) bool { return pw.(*writer).dslot != nil }

// MaxDirect is maxDirect.
const MaxDirect = maxDirect
