//go:build !linux

package vfs

// RenameNoReplace implements FS with link + unlink: link fails when newname
// exists, so an existing name is never replaced. It never calls rename.
// Between the two calls both names exist; a crash there leaves oldname
// behind, which the local backend's recovery treats like any staging file
// whose target exists (a verified re-commit).
func (OS) RenameNoReplace(oldname, newname string) error {
	return linkUnlink(oldname, newname)
}

// StartWriteback is a no-op outside Linux: there is no portable way to
// start write-back early. Durability is unchanged (Sync still flushes).
func StartWriteback(f File, off, n int64) {}
