package bulk

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// flatCol builds one top-level column of a scalar kind (numbers, bool,
// string, binary, timestamp, date, decimal) from converted JSON values,
// writing each value straight into the column's Arrow buffers. An
// array.Builder checks its capacity, goes through an interface and sets a
// validity bit at every value: for the ten-field benchmark record that was
// a quarter of the JSON conversion's time. The validity bitmap is only
// made at the column's first null.
//
// The buffers come from the row buffer's allocator, so Buffered and the
// row-group size count them as they counted the builders'. Not safe for
// concurrent use.
type flatCol struct {
	kind  kind
	dtype arrow.DataType
	width int // bytes a value; an offset's (4) for string and binary; 0 for bool
	mem   memory.Allocator

	n, nulls int
	capN     int            // values the buffers have room for
	valid    *memory.Buffer // validity bits; nil while no value is null
	vals     *memory.Buffer // values, offsets (string, binary) or bits (bool)
	data     *memory.Buffer // string and binary bytes
	dlen     int
	// The buffers' memory, to their capacity.
	vb, db, bits []byte
}

func newFlatCol(n *node, mem memory.Allocator) *flatCol {
	f := &flatCol{kind: n.kind, dtype: n.dtype, mem: mem}
	switch n.kind {
	case kInt32, kFloat32, kDate, kString, kBinary:
		f.width = 4
	case kInt64, kFloat64, kTimestamp:
		f.width = 8
	case kDecimal:
		f.width = 16
	}
	return f
}

// binaryKind reports whether the column has offsets and data.
func (f *flatCol) binaryKind() bool { return f.kind == kString || f.kind == kBinary }

// valBytes is the size of the values buffer for rows values.
func (f *flatCol) valBytes(rows int) int {
	switch {
	case f.kind == kBool:
		return int(bitutil.BytesForBits(int64(rows)))
	case f.binaryKind():
		return 4 * (rows + 1)
	}
	return f.width * rows
}

// reserve makes room for rows values (and data bytes of strings or
// binary) in all, exactly: not rounded up to a power of two, whose spare
// room would count towards the row group's size unused.
func (f *flatCol) reserve(rows, data int) {
	if rows > f.capN {
		if f.vals == nil {
			f.vals = memory.NewResizableBuffer(f.mem)
		}
		f.vals.Reserve(f.valBytes(rows))
		f.vb = f.vals.Buf()
		if f.valid != nil {
			f.valid.Reserve(int(bitutil.BytesForBits(int64(rows))))
			f.bits = f.valid.Buf()
		}
		f.capN = rows
		if f.binaryKind() && f.n == 0 {
			arrow.Int32Traits.PutValue(f.vb, 0)
		}
	}
	if f.binaryKind() && data > len(f.db) {
		if f.data == nil {
			f.data = memory.NewResizableBuffer(f.mem)
		}
		f.data.Reserve(data)
		f.db = f.data.Buf()
	}
}

// grow makes room for one more value, doubling.
func (f *flatCol) grow() { f.reserve(max(2*f.capN, 64), 0) }

// growData makes room for k more data bytes, doubling.
func (f *flatCol) growData(k int) { f.reserve(0, max(2*len(f.db), f.dlen+k, 1024)) }

// appendSlot appends a checked value; src is the buffer the slot's span
// indexes.
func (f *flatCol) appendSlot(sl *slot, src []byte) {
	if f.n == f.capN {
		f.grow()
	}
	i := f.n
	switch f.kind {
	case kInt32, kDate:
		arrow.Int32Traits.PutValue(f.vb[4*i:], int32(sl.i))
	case kInt64, kTimestamp:
		arrow.Int64Traits.PutValue(f.vb[8*i:], sl.i)
	case kFloat32:
		arrow.Float32Traits.PutValue(f.vb[4*i:], float32(sl.f))
	case kFloat64:
		arrow.Float64Traits.PutValue(f.vb[8*i:], sl.f)
	case kBool:
		bitutil.SetBitTo(f.vb, i, sl.i != 0)
	case kDecimal:
		arrow.Decimal128Traits.PutValue(f.vb[16*i:], sl.dec)
	case kString, kBinary:
		v := src[sl.s0:sl.s1]
		if f.dlen+len(v) > len(f.db) {
			f.growData(len(v))
		}
		f.dlen += copy(f.db[f.dlen:], v)
		arrow.Int32Traits.PutValue(f.vb[4*(i+1):], int32(f.dlen))
	}
	if f.bits != nil {
		bitutil.SetBit(f.bits, i)
	}
	f.n++
}

// appendNull appends a null: a zero value (an empty string) and a cleared
// validity bit, making the bitmap at the first null.
func (f *flatCol) appendNull() {
	if f.n == f.capN {
		f.grow()
	}
	i := f.n
	if f.bits == nil {
		f.valid = memory.NewResizableBuffer(f.mem)
		f.valid.Reserve(int(bitutil.BytesForBits(int64(f.capN))))
		f.bits = f.valid.Buf()
		bitutil.SetBitsTo(f.bits, 0, int64(i), true)
	}
	bitutil.ClearBit(f.bits, i)
	switch {
	case f.kind == kBool:
		bitutil.ClearBit(f.vb, i)
	case f.binaryKind():
		arrow.Int32Traits.PutValue(f.vb[4*(i+1):], int32(f.dlen))
	default:
		clear(f.vb[f.width*i : f.width*(i+1)])
	}
	f.nulls++
	f.n++
}

// newArray moves the values appended so far into an array and empties the
// column (its next values go to new buffers).
func (f *flatCol) newArray() arrow.Array {
	if f.vals == nil {
		f.reserve(1, 0) // an empty column still has its buffers
	}
	f.vals.ResizeNoShrink(f.valBytes(f.n))
	bufs := []*memory.Buffer{nil, f.vals}
	if f.valid != nil {
		f.valid.ResizeNoShrink(int(bitutil.BytesForBits(int64(f.n))))
		bufs[0] = f.valid
	}
	if f.binaryKind() {
		if f.data == nil {
			f.data = memory.NewResizableBuffer(f.mem)
		}
		f.data.ResizeNoShrink(f.dlen)
		bufs = append(bufs, f.data)
	}
	d := array.NewData(f.dtype, f.n, bufs, nil, f.nulls, 0)
	a := array.MakeFromData(d)
	d.Release()
	f.release()
	return a
}

// release drops the column's buffers and values.
func (f *flatCol) release() {
	for _, b := range []*memory.Buffer{f.valid, f.vals, f.data} {
		if b != nil {
			b.Release()
		}
	}
	*f = flatCol{kind: f.kind, dtype: f.dtype, width: f.width, mem: f.mem}
}
