package source

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"slices"
)

// fileSet is a summary of a set of file paths, of a fixed size whatever
// the number of files: an invertible Bloom lookup table (4 partitions of
// setCells cells; each cell the count, the XOR of the ids and the XOR of
// the check sums of the files hashed to it). Two summaries subtract, and
// the difference of the two sets can be listed back from the result as
// long as it is small (about 30 files). The directory source's position
// keeps the summary of the files that sort before its file, so that a
// resume tells a file added among them (it would never be read: an error
// naming it) from files removed since they were read (fine).
type fileSet struct {
	n     int64 // files in the set
	cells [setParts * setCells]setCell
}

type setCell struct {
	count int64
	id    uint64
	chk   uint32
}

const (
	setParts = 4
	setCells = 20
)

// fileID is a file path's 64-bit id: the first 8 bytes of its SHA-256.
func fileID(path string) uint64 {
	h := sha256.Sum256([]byte(path))
	return binary.LittleEndian.Uint64(h[:8])
}

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func idCheck(id uint64) uint32 { return uint32(mix(id^0x5bd1e9955bd1e995) >> 32) }

// cell returns the index of id's cell in partition p.
func cellOf(id uint64, p int) int {
	return p*setCells + int(mix(id+uint64(p+1)*0x9e3779b97f4a7c15)%setCells)
}

// add adds (sign 1) or removes (sign -1) the file with id.
func (s *fileSet) add(id uint64, sign int64) {
	s.n += sign
	chk := idCheck(id)
	for p := range setParts {
		c := &s.cells[cellOf(id, p)]
		c.count += sign
		c.id ^= id
		c.chk ^= chk
	}
}

// sub returns s minus o, cell by cell: the summary of the difference.
func (s *fileSet) sub(o *fileSet) fileSet {
	d := fileSet{n: s.n - o.n}
	for i := range d.cells {
		a, b := s.cells[i], o.cells[i]
		d.cells[i] = setCell{count: a.count - b.count, id: a.id ^ b.id, chk: a.chk ^ b.chk}
	}
	return d
}

// decode lists a difference (sub): the ids in the first set only, and the
// number of ids in the second only. ok is false when the difference is too
// large to list.
func (s fileSet) decode() (added []uint64, removed int, ok bool) {
	for progress := true; progress; {
		progress = false
		for i := range s.cells {
			c := s.cells[i]
			if (c.count != 1 && c.count != -1) || c.chk != idCheck(c.id) {
				continue
			}
			if c.count == 1 {
				added = append(added, c.id)
			} else {
				removed++
			}
			s.add(c.id, -c.count)
			progress = true
		}
	}
	for _, c := range s.cells {
		if c != (setCell{}) {
			return nil, 0, false
		}
	}
	return added, removed, true
}

// encode returns the cells as base64 ("" for an empty set): per cell its
// count as a uvarint, then, when not 0, its id and check sum.
func (s *fileSet) encode() string {
	if s.n == 0 {
		return ""
	}
	b := make([]byte, 0, len(s.cells)*13)
	for _, c := range s.cells {
		b = binary.AppendUvarint(b, uint64(c.count))
		if c.count != 0 {
			b = binary.LittleEndian.AppendUint64(b, c.id)
			b = binary.LittleEndian.AppendUint32(b, c.chk)
		}
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// decodeFileSet reads what encode wrote for a set of n files.
func decodeFileSet(n int64, enc string) (fileSet, error) {
	s := fileSet{n: n}
	if n < 0 {
		return s, errors.New("negative file count")
	}
	if enc == "" {
		if n != 0 {
			return s, errors.New("no summary of the files")
		}
		return s, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return s, errors.New("summary of the files is not base64")
	}
	var total int64
	for i := range s.cells {
		count, k := binary.Uvarint(b)
		if k <= 0 || count > uint64(n) {
			return s, errors.New("summary of the files is malformed")
		}
		b = b[k:]
		c := &s.cells[i]
		c.count = int64(count)
		total += c.count
		if count != 0 {
			if len(b) < 12 {
				return s, errors.New("summary of the files is truncated")
			}
			c.id, c.chk = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:])
			b = b[12:]
		}
	}
	if len(b) != 0 || total != setParts*n {
		return s, errors.New("summary of the files does not match its file count")
	}
	return s, nil
}

// summarize returns the summary of files.
func summarize(files []string) fileSet {
	var s fileSet
	for _, f := range files {
		s.add(fileID(f), 1)
	}
	return s
}

// addedFiles returns the files of now (sorted), whose summary is cur, that
// the summary then does not hold: files added since. Files of then that
// are not in now are no error. ok is false when the difference is too
// large to list (or lists an id that is none of now's).
func addedFiles(now []string, cur, then *fileSet) (added []string, ok bool) {
	if *cur == *then {
		return nil, true
	}
	ids, _, ok := cur.sub(then).decode()
	if !ok {
		return nil, false
	}
	if len(ids) == 0 {
		return nil, true
	}
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for _, f := range now {
		if want[fileID(f)] {
			added = append(added, f)
		}
	}
	if len(added) != len(ids) {
		return nil, false
	}
	slices.Sort(added)
	return added, true
}
