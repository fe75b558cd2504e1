package errorfs

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// OpKind says which method an operation called.
type OpKind uint8

// The operations. The Op* kinds are FS methods, the OpFile* kinds are
// methods of a File.
const (
	OpCreate OpKind = iota + 1
	OpOpenAppend
	OpOpen
	OpStat
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpSyncDir
	OpFileWrite
	OpFileRead
	OpFileReadAt
	OpFileSync
	OpFileTruncate
	OpFileClose
	OpFileStat
)

// String returns a short lower-case name such as "sync" or "rename".
func (k OpKind) String() string {
	switch k {
	case OpCreate:
		return "create"
	case OpOpenAppend:
		return "openappend"
	case OpOpen:
		return "open"
	case OpStat:
		return "stat"
	case OpRemove:
		return "remove"
	case OpRename:
		return "rename"
	case OpMkdir:
		return "mkdir"
	case OpReadDir:
		return "readdir"
	case OpSyncDir:
		return "syncdir"
	case OpFileWrite:
		return "write"
	case OpFileRead:
		return "read"
	case OpFileReadAt:
		return "readat"
	case OpFileSync:
		return "sync"
	case OpFileTruncate:
		return "truncate"
	case OpFileClose:
		return "close"
	case OpFileStat:
		return "fstat"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// IsFileOp reports whether k is a method of a File.
func (k OpKind) IsFileOp() bool { return k >= OpFileWrite && k <= OpFileStat }

// Mutates reports whether an operation of kind k changes the filesystem's
// state or its durability: Create, Remove, RenameNoReplace, Mkdir, SyncDir,
// and a File's Write, Sync and Truncate.
func (k OpKind) Mutates() bool {
	switch k {
	case OpCreate, OpRemove, OpRename, OpMkdir, OpSyncDir, OpFileWrite, OpFileSync, OpFileTruncate:
		return true
	}
	return false
}

// Op describes one operation.
type Op struct {
	Kind OpKind
	// Path is the name the operation was called with; for File methods,
	// the name the file was opened with; for RenameNoReplace, the old name.
	Path string
	// NewPath is the new name of a RenameNoReplace, empty otherwise.
	NewPath string
	// Index is the 1-based number of the operation among the counted ones,
	// or 0 if the filter did not count it.
	Index int64
}

// String returns for example "#7 sync /out/a" or "rename /a -> /b".
func (o Op) String() string {
	var b strings.Builder
	if o.Index > 0 {
		fmt.Fprintf(&b, "#%d ", o.Index)
	}
	b.WriteString(o.Kind.String())
	b.WriteByte(' ')
	b.WriteString(o.Path)
	if o.Kind == OpRename {
		b.WriteString(" -> ")
		b.WriteString(o.NewPath)
	}
	return b.String()
}

// Filter chooses which operations are counted (and so can be selected by
// index). Filters must be safe for concurrent use and must not keep state.
type Filter func(Op) bool

// PathPrefix counts operations whose Path or NewPath is dir or lies under
// it. Names are compared after filepath.Clean, as strings: mix absolute and
// relative names only if the code under test does too.
func PathPrefix(dir string) Filter {
	dir = filepath.Clean(dir)
	in := func(p string) bool {
		if p == "" {
			return false
		}
		p = filepath.Clean(p)
		return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
	}
	return func(op Op) bool { return in(op.Path) || in(op.NewPath) }
}

// OfKind counts operations of the given kinds.
func OfKind(kinds ...OpKind) Filter {
	kinds = slices.Clone(kinds)
	return func(op Op) bool { return slices.Contains(kinds, op.Kind) }
}

// Mutating is a Filter counting the operations that change state or make it
// durable (see [OpKind.Mutates]): the points where a crash makes a
// difference.
func Mutating(op Op) bool { return op.Kind.Mutates() }

// And counts operations that every filter counts.
func And(filters ...Filter) Filter {
	filters = slices.Clone(filters)
	return func(op Op) bool {
		for _, f := range filters {
			if !f(op) {
				return false
			}
		}
		return true
	}
}
