package crashfs

import (
	"maps"
	"math/rand/v2"
	"slices"
)

// CrashClone returns a new, independent filesystem holding what the disk
// could hold after a power loss at this instant: every durable file and
// entry, plus a random share, chosen by seed, of what was not durable (see
// the crash model in the package documentation). The same seed on the same
// state gives the same clone. Files open on f are not affected and do not
// affect the clone. Everything in the clone is durable.
//
// CrashClone is safe for concurrent use with every other method.
func (f *FS) CrashClone(seed int64) *FS {
	return f.crashClone(rand.New(rand.NewPCG(uint64(seed), 0x6372617368667321)))
}

// CrashCloneSynced is CrashClone keeping none of what was not durable: every
// file has exactly its synced data and every directory exactly its synced
// entries.
func (f *FS) CrashCloneSynced() *FS {
	return f.crashClone(nil)
}

// crashClone builds the clone; rng nil keeps only the durable state.
func (f *FS) crashClone(rng *rand.Rand) *FS {
	f.mu.Lock()
	defer f.mu.Unlock()

	// Every inode that may appear after the crash, in an order fixed by the
	// state alone (names sorted), so that a seed gives one result.
	var (
		order []*inode
		seen  = map[*inode]bool{}
	)
	visit := func(n *inode) {
		if n != nil && !seen[n] {
			seen[n] = true
			order = append(order, n)
		}
	}
	visit(f.root)
	for i := 0; i < len(order); i++ {
		n := order[i]
		if !n.dir {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			visit(n.children[name])
		}
		for _, name := range slices.Sorted(maps.Keys(n.syncedChildren)) {
			visit(n.syncedChildren[name])
		}
		for _, c := range n.log {
			visit(c.node)
		}
	}

	// Directories: a random prefix of each pending log, widened until every
	// rename is in all or none of its directories.
	cut := map[*inode]int{}
	for _, n := range order {
		if n.dir && len(n.log) > 0 {
			cut[n] = prefixLen(rng, len(n.log))
		}
	}
	for changed := true; changed; {
		changed = false
		for _, n := range order {
			if !n.dir {
				continue
			}
			for _, c := range n.log[:cut[n]] {
				if c.link == nil {
					continue
				}
				for _, o := range c.link.dirs {
					if i := lastLinked(o.log, c.link); i+1 > cut[o] {
						cut[o] = i + 1
						visit(o) // an unreachable directory may still chain renames
						changed = true
					}
				}
			}
		}
	}

	// Files: the synced data plus a prefix of the pending operations.
	content := map[*inode][]byte{}
	for _, n := range order {
		if !n.dir {
			content[n] = crashData(n, rng)
		}
	}

	// Build the new tree from the root. A directory entry that would close
	// a cycle (possible only through unsynced directory renames) is dropped.
	clones := map[*inode]*inode{}
	onPath := map[*inode]bool{}
	var build func(n *inode) *inode
	build = func(n *inode) *inode {
		if c := clones[n]; c != nil {
			return c
		}
		if !n.dir {
			data := content[n]
			c := &inode{perm: n.perm, data: data, synced: slices.Clone(data)}
			clones[n] = c
			return c
		}
		c := newDir(n.perm)
		clones[n] = c
		onPath[n] = true
		entries := maps.Clone(n.syncedChildren)
		for _, ch := range n.log[:cut[n]] {
			applyChange(entries, ch)
		}
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			child := entries[name]
			if onPath[child] {
				continue
			}
			cc := build(child)
			c.children[name] = cc
			c.syncedChildren[name] = cc
		}
		onPath[n] = false
		return c
	}
	return &FS{root: build(f.root)}
}

// prefixLen chooses how many of n pending changes survive: none, all or a
// random number, each with probability 1/3.
func prefixLen(rng *rand.Rand, n int) int {
	if rng == nil {
		return 0
	}
	switch rng.IntN(3) {
	case 0:
		return 0
	case 1:
		return n
	default:
		return rng.IntN(n + 1)
	}
}

// crashData returns a fresh copy of a file's content after a crash: its
// synced data, then a prefix of its pending operations, the first operation
// not kept being possibly torn if it is a write.
func crashData(n *inode, rng *rand.Rand) []byte {
	data := slices.Clone(n.synced)
	if rng == nil || len(n.pending) == 0 {
		return data
	}
	k := prefixLen(rng, len(n.pending))
	for _, op := range n.pending[:k] {
		data = op.apply(data)
	}
	if k < len(n.pending) && !n.pending[k].truncate && rng.IntN(2) == 0 {
		op := n.pending[k]
		op.data = op.data[:rng.IntN(len(op.data)+1)]
		data = op.apply(data)
	}
	return data
}
