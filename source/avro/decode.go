package avro

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"

	"github.com/filesink/filesink/source"
)

// ErrNotFramed is wrapped by the error of a value without the Confluent
// wire format's header (a zero magic byte and a schema id).
var ErrNotFramed = errors.New("not in the Confluent wire format (magic byte 0, 4-byte schema id)")

// ErrBadValue is wrapped by the error of a value whose body does not
// decode with the schema its header names.
var ErrBadValue = errors.New("the value does not decode with its schema")

// Decoder decodes Confluent-framed Avro values into JSON objects. It is
// safe for concurrent use (each call has its own reader).
type Decoder struct {
	reg     *Registry
	fits    atomic.Pointer[map[int]*fit] // the schemas whose values decode, by id; copied on write
	writers sync.Pool                    // of *JSONWriter

	mu     sync.Mutex // serializes writes of fits and the follower's decisions
	follow *follower  // Follow's columns; nil: every schema decodes as it is
}

// NewDecoder returns a decoder of the values whose schemas reg holds.
func NewDecoder(reg *Registry) *Decoder { return &Decoder{reg: reg} }

// Decode appends the JSON of value to dst and returns it with the schema
// id of value. A nil error means the whole body decoded with its schema
// (and, with Follow, fits the columns). A value without the header wraps
// ErrNotFramed, one whose schema id the registry does not have
// ErrUnknownSchema, one that does not decode ErrBadValue: the record is
// bad. With Follow, a *ChangeError or an *IncompatibleError reports its
// schema. Any other error is the registry's (it could not be asked) and
// says nothing of the record.
func (d *Decoder) Decode(ctx context.Context, dst, value []byte) ([]byte, int, error) {
	out, sch, err := d.decode(ctx, dst, value)
	return out, sch.ID, err
}

// decode is Decode, naming the schema with its version when Follow knows
// it.
func (d *Decoder) decode(ctx context.Context, dst, value []byte) ([]byte, source.Schema, error) {
	if len(value) < 5 || value[0] != 0 {
		return dst, source.Schema{}, ErrNotFramed
	}
	id := int(binary.BigEndian.Uint32(value[1:5]))
	ft, err := d.fitOf(ctx, id)
	if err != nil {
		return dst, source.Schema{ID: id}, err
	}
	sch := source.Schema{ID: id, Version: ft.version}
	w, _ := d.writers.Get().(*JSONWriter)
	if w == nil {
		w = new(JSONWriter)
	}
	out, err := w.Append(dst, ft.schema, value[5:])
	d.writers.Put(w)
	if err != nil {
		return dst, sch, fmt.Errorf("%w (schema %d): %v", ErrBadValue, id, err)
	}
	if ft.fill != nil && len(out) > len(dst)+2 && out[len(out)-1] == '}' {
		out = append(append(out[:len(out)-1], ft.fill...), '}')
	}
	return out, sch, nil
}

// fitOf returns how the values of schema id decode: at once for a schema
// met before, else from the registry and, with Follow, the columns.
func (d *Decoder) fitOf(ctx context.Context, id int) (*fit, error) {
	if m := d.fits.Load(); m != nil {
		if ft, ok := (*m)[id]; ok {
			return ft, nil
		}
	}
	s, err := d.reg.Schema(ctx, id)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.fits.Load(); m != nil {
		if ft, ok := (*m)[id]; ok {
			return ft, nil // another call took it meanwhile
		}
	}
	if d.follow == nil {
		ft := &fit{schema: s}
		d.setFit(id, ft)
		return ft, nil
	}
	return d.admit(ctx, id, s)
}

// setFit records ft for id, with d.mu held.
func (d *Decoder) setFit(id int, ft *fit) {
	m := map[int]*fit{}
	if old := d.fits.Load(); old != nil {
		maps.Copy(m, *old)
	}
	m[id] = ft
	d.fits.Store(&m)
}

// AppendJSON appends the JSON of the Avro binary body of schema s to dst.
// A nil error means every byte of body was read.
func AppendJSON(dst []byte, s avro.Schema, body []byte) ([]byte, error) {
	var w JSONWriter
	return w.Append(dst, s, body)
}

// JSONWriter is AppendJSON with a reader kept from one call to the next
// (no allocation per value for it). The zero value is ready. It is not
// safe for concurrent use.
type JSONWriter struct {
	r *avro.Reader
}

// Append is AppendJSON.
func (w *JSONWriter) Append(dst []byte, s avro.Schema, body []byte) ([]byte, error) {
	if w.r == nil {
		w.r = avro.NewReader(nil, 0)
	}
	r := w.r.Reset(body)
	r.Error = nil
	out := appendValue(dst, r, s)
	if r.Error != nil {
		return dst, r.Error
	}
	r.Peek() // io.EOF when the body is all read
	if !errors.Is(r.Error, io.EOF) {
		return dst, errors.New("bytes left after the value")
	}
	return out, nil
}

// appendValue appends the JSON of one value of s read from r; r.Error
// holds a failure.
func appendValue(b []byte, r *avro.Reader, s avro.Schema) []byte {
	if r.Error != nil {
		return b
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return appendValue(b, r, s.Schema())
	case *avro.NullSchema:
		return append(b, "null"...)
	case *avro.PrimitiveSchema:
		return appendPrimitive(b, r, s)
	case *avro.RecordSchema:
		b = append(b, '{')
		for i, f := range s.Fields() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, f.Name())
			b = append(b, ':')
			b = appendValue(b, r, f.Type())
		}
		return append(b, '}')
	case *avro.EnumSchema:
		i := int(r.ReadInt())
		if i < 0 || i >= len(s.Symbols()) {
			r.ReportError("enum "+s.FullName(), fmt.Sprintf("symbol %d of %d", i, len(s.Symbols())))
			return b
		}
		return appendString(b, s.Symbols()[i])
	case *avro.ArraySchema:
		return appendBlocks(b, r, '[', ']', func(b []byte) []byte { return appendValue(b, r, s.Items()) })
	case *avro.MapSchema:
		return appendBlocks(b, r, '{', '}', func(b []byte) []byte {
			b = appendString(b, r.ReadString())
			return appendValue(append(b, ':'), r, s.Values())
		})
	case *avro.UnionSchema:
		i := int(r.ReadLong())
		if i < 0 || i >= len(s.Types()) {
			r.ReportError("union", fmt.Sprintf("branch %d of %d", i, len(s.Types())))
			return b
		}
		return appendValue(b, r, s.Types()[i])
	case *avro.FixedSchema:
		raw := make([]byte, s.Size())
		r.Read(raw)
		if ls, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return appendDecimal(b, raw, ls.Scale())
		}
		return appendBase64(b, raw)
	}
	r.ReportError("decode", "unsupported schema "+string(s.Type()))
	return b
}

// appendBlocks appends an array or map's blocks between open and close,
// each item by item.
func appendBlocks(b []byte, r *avro.Reader, open, close byte, item func([]byte) []byte) []byte {
	b = append(b, open)
	first := true
	for r.Error == nil {
		n, _ := r.ReadBlockHeader()
		if n == 0 {
			break
		}
		for range n {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = item(b)
			if r.Error != nil {
				return b
			}
		}
	}
	return append(b, close)
}

func appendPrimitive(b []byte, r *avro.Reader, s *avro.PrimitiveSchema) []byte {
	var lt avro.LogicalType
	if ls := s.Logical(); ls != nil {
		lt = ls.Type()
	}
	switch s.Type() {
	case avro.Null:
		return append(b, "null"...)
	case avro.Boolean:
		return strconv.AppendBool(b, r.ReadBool())
	case avro.Int:
		v := r.ReadInt()
		if lt == avro.Date {
			return appendTime(b, time.Unix(int64(v)*86400, 0), "2006-01-02")
		}
		return strconv.AppendInt(b, int64(v), 10)
	case avro.Long:
		v := r.ReadLong()
		switch lt {
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return appendTime(b, time.UnixMilli(v), time.RFC3339Nano)
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return appendTime(b, time.UnixMicro(v), time.RFC3339Nano)
		}
		return strconv.AppendInt(b, v, 10)
	case avro.Float:
		return appendFloat(b, float64(r.ReadFloat()), 32)
	case avro.Double:
		return appendFloat(b, r.ReadDouble(), 64)
	case avro.String:
		return appendString(b, r.ReadString())
	case avro.Bytes:
		raw := r.ReadBytes()
		if ls, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return appendDecimal(b, raw, ls.Scale())
		}
		return appendBase64(b, raw)
	}
	r.ReportError("decode", "unsupported type "+string(s.Type()))
	return b
}

func appendTime(b []byte, t time.Time, layout string) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, layout)
	return append(b, '"')
}

// appendFloat appends f as a JSON number, NaN and the infinities as the
// strings Avro's JSON encoding uses.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// appendString appends s as a JSON string: '"', '\\' and the control
// characters escaped, every other character as it is, each byte of
// invalid UTF-8 as U+FFFD. Runs of plain ASCII are copied whole.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = appendEscaped(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscaped appends the JSON escape of the ASCII byte c: '"', '\\' or
// a control character.
func appendEscaped(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

func appendBase64(b []byte, raw []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, raw)
	return append(b, '"')
}

// appendDecimal appends the two's-complement big-endian unscaled value
// raw with scale digits after the point, as a JSON string. Up to 8 bytes
// (18 digits) it is an int64.
func appendDecimal(b []byte, raw []byte, scale int) []byte {
	var tmp [24]byte
	var digits []byte
	if len(raw) <= 8 {
		var v int64
		if len(raw) > 0 && raw[0]&0x80 != 0 {
			v = -1
		}
		for _, c := range raw {
			v = v<<8 | int64(c)
		}
		digits = strconv.AppendInt(tmp[:0], v, 10)
	} else {
		n := new(big.Int).SetBytes(raw)
		if raw[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(raw))*8))
		}
		digits = n.Append(tmp[:0], 10)
	}
	b = append(b, '"')
	if digits[0] == '-' {
		b = append(b, '-')
		digits = digits[1:]
	}
	switch {
	case scale <= 0:
		b = append(b, digits...)
	case len(digits) <= scale:
		b = append(b, '0', '.')
		for range scale - len(digits) {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[:len(digits)-scale]...)
		b = append(append(b, '.'), digits[len(digits)-scale:]...)
	}
	return append(b, '"')
}

// Values returns d as the source package's value decoder (for
// source.Decoded): values without the header, with an unknown schema id
// or that do not decode are bad records (source.ErrBadRecord); the
// registry's own failures are not.
func (d *Decoder) Values() source.ValueDecoder { return values{d} }

type values struct{ d *Decoder }

func (v values) Decode(ctx context.Context, dst, value []byte) ([]byte, source.Schema, error) {
	out, sch, err := v.d.decode(ctx, dst, value)
	if errors.Is(err, ErrNotFramed) || errors.Is(err, ErrUnknownSchema) || errors.Is(err, ErrBadValue) {
		return dst, sch, fmt.Errorf("%w: %w", source.ErrBadRecord, err)
	}
	return out, sch, err
}
