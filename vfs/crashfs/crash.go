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
	c := &cloner{rng: rng, seen: map[*inode]bool{}, cut: map[*inode]int{}}
	c.collect(f.root)
	c.cutLogs()
	// Files: the synced data plus a prefix of the pending operations.
	c.content = map[*inode][]byte{}
	for _, n := range c.order {
		if !n.dir {
			c.content[n] = crashData(n, rng)
		}
	}
	c.clones, c.onPath = map[*inode]*inode{}, map[*inode]bool{}
	return &FS{root: c.build(f.root)}
}

// cloner holds the state of one crashClone.
type cloner struct {
	rng *rand.Rand
	// order is every inode that may appear after the crash, in an order
	// fixed by the state alone (names sorted), so that a seed gives one
	// result.
	order   []*inode
	seen    map[*inode]bool
	cut     map[*inode]int // directory -> how many of its pending changes survive
	content map[*inode][]byte
	clones  map[*inode]*inode
	onPath  map[*inode]bool // directories on the path being built
}

func (c *cloner) visit(n *inode) {
	if n != nil && !c.seen[n] {
		c.seen[n] = true
		c.order = append(c.order, n)
	}
}

// collect visits every inode reachable from root through live entries,
// synced entries or pending changes.
func (c *cloner) collect(root *inode) {
	c.visit(root)
	for i := 0; i < len(c.order); i++ {
		n := c.order[i]
		if !n.dir {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			c.visit(n.children[name])
		}
		for _, name := range slices.Sorted(maps.Keys(n.syncedChildren)) {
			c.visit(n.syncedChildren[name])
		}
		for _, ch := range n.log {
			c.visit(ch.node)
		}
	}
}

// cutLogs chooses, for each directory, a random prefix of its pending log,
// widened until every rename is in all or none of its directories.
func (c *cloner) cutLogs() {
	for _, n := range c.order {
		if n.dir && len(n.log) > 0 {
			c.cut[n] = prefixLen(c.rng, len(n.log))
		}
	}
	for changed := true; changed; {
		changed = false
		for _, n := range c.order {
			if !n.dir {
				continue
			}
			for _, ch := range n.log[:c.cut[n]] {
				if ch.link == nil {
					continue
				}
				for _, o := range ch.link.dirs {
					if i := lastLinked(o.log, ch.link); i+1 > c.cut[o] {
						c.cut[o] = i + 1
						c.visit(o) // an unreachable directory may still chain renames
						changed = true
					}
				}
			}
		}
	}
}

// build makes the clone of n and, for a directory, of its entries after
// the crash. A directory entry that would close a cycle (possible only
// through unsynced directory renames) is dropped.
func (c *cloner) build(n *inode) *inode {
	if cl := c.clones[n]; cl != nil {
		return cl
	}
	if !n.dir {
		data := c.content[n]
		cl := &inode{perm: n.perm, data: data, synced: slices.Clone(data)}
		c.clones[n] = cl
		return cl
	}
	cl := newDir(n.perm)
	c.clones[n] = cl
	c.onPath[n] = true
	entries := maps.Clone(n.syncedChildren)
	for _, ch := range n.log[:c.cut[n]] {
		applyChange(entries, ch)
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		child := entries[name]
		if c.onPath[child] {
			continue
		}
		cc := c.build(child)
		cl.children[name] = cc
		cl.syncedChildren[name] = cc
	}
	c.onPath[n] = false
	return cl
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
