package source

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// headSize is how much of the start of a file its head fingerprint covers.
const headSize = 4 << 10

// headSum is the fingerprint of the first bytes of a file: the first 8
// bytes of their SHA-256.
func headSum(b []byte) uint64 {
	h := sha256.Sum256(b)
	return binary.LittleEndian.Uint64(h[:8])
}

// readFile is what the directory source knows of a file it read to its
// end: its path id (32 bits of fileID), its size then, and 32 bits of the
// fingerprint of its first min(headSize, size) bytes (headSum).
type readFile struct {
	path uint32
	size uint64
	head uint32
}

// newReadFile is the readFile of path, of size bytes, whose first
// min(headSize, size) bytes are head.
func newReadFile(path string, size int64, head []byte) readFile {
	return readFile{path: uint32(fileID(path)), size: uint64(size), head: uint32(headSum(head))}
}

// key is the element's 64-bit hash: it places the element in the cells.
func (e readFile) key() uint64 {
	return mix(mix(uint64(e.path)<<32|uint64(e.head)) ^ e.size)
}

// check is the element's check sum: a cell holding exactly one element
// holds its check sum.
func (e readFile) check() uint32 { return uint32(mix(e.key()^0x5bd1e9955bd1e995) >> 32) }

// readSet is a summary of the files read to their end, of a fixed size
// whatever their number: an invertible Bloom lookup table like fileSet
// (setParts partitions of setCells cells), whose elements are the files
// with what was read of them (readFile), and whose cells also carry the
// XOR of their fields. Two summaries subtract, and the difference lists
// back whole elements as long as it is small (about 30): a file read and
// changed since is one element removed and one added with the same path
// id, telling its size then and now and whether its head is the same; an
// element added alone is a file added since; one removed alone, a file
// removed since.
type readSet struct {
	n     int64 // files in the set
	cells [setParts * setCells]readCell
}

type readCell struct {
	count int64
	path  uint32 // XOR of the elements' fields
	head  uint32
	size  uint64
	chk   uint32 // XOR of their check sums
}

// pure reports whether c holds exactly one element (added, count 1, or
// removed, count -1), and which.
func (c readCell) pure() (readFile, bool) {
	e := readFile{path: c.path, size: c.size, head: c.head}
	return e, (c.count == 1 || c.count == -1) && c.chk == e.check()
}

// add adds (sign 1) or removes (sign -1) e.
func (s *readSet) add(e readFile, sign int64) {
	s.n += sign
	k, chk := e.key(), e.check()
	for p := range setParts {
		c := &s.cells[cellOf(k, p)]
		c.count += sign
		c.path ^= e.path
		c.head ^= e.head
		c.size ^= e.size
		c.chk ^= chk
	}
}

// merge adds every element of o to s.
func (s *readSet) merge(o *readSet) {
	s.n += o.n
	for i := range s.cells {
		a, b := &s.cells[i], o.cells[i]
		a.count += b.count
		a.path ^= b.path
		a.head ^= b.head
		a.size ^= b.size
		a.chk ^= b.chk
	}
}

// sub returns s minus o, cell by cell: the summary of the difference.
func (s *readSet) sub(o *readSet) readSet {
	d := *s
	d.n = s.n - o.n
	for i := range d.cells {
		c, b := &d.cells[i], o.cells[i]
		c.count -= b.count
		c.path ^= b.path
		c.head ^= b.head
		c.size ^= b.size
		c.chk ^= b.chk
	}
	return d
}

// decode lists a difference (sub): the elements in the first set only
// (added) and in the second only (removed). ok is false when the
// difference is too large to list.
func (s readSet) decode() (added, removed []readFile, ok bool) {
	for progress := true; progress; {
		progress = false
		for i := range s.cells {
			e, pure := s.cells[i].pure()
			if !pure {
				continue
			}
			if s.cells[i].count == 1 {
				added = append(added, e)
			} else {
				removed = append(removed, e)
			}
			s.add(e, -s.cells[i].count)
			progress = true
		}
	}
	for _, c := range s.cells {
		if c != (readCell{}) {
			return nil, nil, false
		}
	}
	return added, removed, true
}

// encode returns the cells as base64 ("" for an empty set): per cell its
// count as a uvarint, then, when not 0, its path id, head and check sum
// (4 bytes each) and its size as a uvarint.
func (s *readSet) encode() string {
	if s.n == 0 {
		return ""
	}
	b := make([]byte, 0, len(s.cells)*32)
	for _, c := range s.cells {
		b = binary.AppendUvarint(b, uint64(c.count))
		if c.count != 0 {
			b = binary.LittleEndian.AppendUint32(b, c.path)
			b = binary.LittleEndian.AppendUint32(b, c.head)
			b = binary.LittleEndian.AppendUint32(b, c.chk)
			b = binary.AppendUvarint(b, c.size)
		}
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// decodeReadSet reads what encode wrote for a set of n files. It checks
// that a cell of count 1 holds one element that belongs in it.
func decodeReadSet(n int64, enc string) (readSet, error) {
	s := readSet{n: n}
	if n < 0 {
		return s, errors.New("negative file count")
	}
	if enc == "" {
		if n != 0 {
			return s, errors.New("no summary of the files read")
		}
		return s, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return s, errors.New("summary of the files read is not base64")
	}
	malformed := errors.New("summary of the files read is malformed")
	var total int64
	for i := range s.cells {
		count, k := binary.Uvarint(b)
		if k <= 0 || count > uint64(n) {
			return s, malformed
		}
		b = b[k:]
		c := &s.cells[i]
		c.count = int64(count)
		total += c.count
		if count == 0 {
			continue
		}
		if len(b) < 12 {
			return s, errors.New("summary of the files read is truncated")
		}
		c.path, c.head, c.chk = binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
		if c.size, k = binary.Uvarint(b[12:]); k <= 0 {
			return s, malformed
		}
		b = b[12+k:]
		if e, pure := c.pure(); count == 1 && (!pure || cellOf(e.key(), i/setCells) != i) {
			return s, malformed
		}
	}
	if len(b) != 0 || total != setParts*n {
		return s, errors.New("summary of the files read does not match its file count")
	}
	return s, nil
}
