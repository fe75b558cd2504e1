package bulk

import (
	"encoding/base64"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/filesink/filesink/internal/jsonscan"
)

// The JSON → Arrow converter.
//
// A record is converted in two phases so that a bad record leaves nothing
// in the builders: the check phase parses the whole record, converts every
// top-level scalar into a slot and checks every nested value (lists,
// structs) without appending; only when all of it fits the schema does the
// append phase move the slots into the builders and walk the nested values
// again, appending. Flat records are thus parsed once; nested values twice.
//
// The parser walks the record's grammar itself, driven by the schema, and
// takes its tokens (strings, numbers, literals, skipped values) from
// jsonscan: no encoding/json, no reflection, and no allocation per record
// once the scratch buffers have grown. It accepts what encoding/json
// accepts: strings with invalid UTF-8 or lone surrogates get U+FFFD, and a
// duplicate key keeps its last value. A key not in the schema makes the
// record bad (RejectUnknown), or is skipped after checking its value's
// syntax and counted once the record is added (DropUnknown); only the
// check phase looks at such keys. BenchmarkConvertVsArrowJSONReader
// measures it against Arrow's own array.NewJSONReader.

const (
	slotMissing uint8 = iota
	slotNull
	slotValue
)

// slot holds one converted scalar (or where a nested value is).
type slot struct {
	state     uint8
	inScratch bool // s0:s1 index the scratch buffer, else the record
	i         int64
	f         float64
	dec       decimal128.Num
	s0, s1    int // string/binary bytes; for nested nodes the raw JSON span
}

// converter appends JSON records to the columns of a schema's top-level
// fields: flat columns for scalar fields, Arrow builders for lists and
// structs. Not safe for concurrent use.
type converter struct {
	root    *node
	schema  *arrow.Schema
	rb      *array.RecordBuilder // the builders of nested fields (flat fields' stay empty)
	flat    []*flatCol           // per field; nil for nested ones
	rows    int                  // rows converted since the last record
	slots   []slot
	scratch []byte
	// per nesting depth, reused: which struct children were seen (check
	// phase) and where their values are (append phase).
	seen  [][]bool
	spans [][][2]int
	keys  []mapKeys // per nesting depth: a map's keys (check phase)
	p     parser
	tmp   []byte // unescaped base64 text
	// drop, when set, makes keys not in the schema dropped and counted in
	// it (DropUnknown); nil rejects them (RejectUnknown).
	drop *Dropped
	// unk are the dropped keys of the record being converted, counted in
	// drop once it is added; named are the names this converter has
	// passed to drop (at most maxDroppedNames), by struct.
	unk   []unknownKey
	named map[*node]map[string]bool
	nameN int
}

// unknownKey is a key not in the schema: the struct it is in (the root
// for a top-level key) and its raw contents' span in the record.
type unknownKey struct {
	n      *node
	k0, k1 int
	esc    bool
}

// newConverter returns a converter for records of s, whose columns
// allocate from mem. Release it when done.
func newConverter(s *Schema, mem memory.Allocator) *converter {
	c := &converter{root: s.root, schema: s.arrow, rb: array.NewRecordBuilder(mem, s.arrow), slots: make([]slot, len(s.root.fields))}
	c.flat = make([]*flatCol, len(s.root.fields))
	for i, n := range s.root.fields {
		if n.kind < kList {
			c.flat[i] = newFlatCol(n, mem)
		}
	}
	return c
}

// record moves the rows converted since the last call into a record
// batch, which the caller releases.
func (c *converter) record() arrow.Record {
	cols := make([]arrow.Array, len(c.flat))
	for i, f := range c.flat {
		if f != nil {
			cols[i] = f.newArray()
		} else {
			cols[i] = c.rb.Field(i).NewArray()
		}
	}
	rec := array.NewRecord(c.schema, cols, int64(c.rows))
	for _, a := range cols {
		a.Release()
	}
	c.rows = 0
	return rec
}

// lens is field i's column length in rows, and in data bytes for a flat
// string or binary column.
func (c *converter) lens(i int) (rows, data int) {
	if f := c.flat[i]; f != nil {
		return f.n, f.dlen
	}
	return c.rb.Field(i).Len(), 0
}

// reserve makes room in field i's column for rows rows (and data bytes of
// a flat string or binary column). Nested columns are left to grow.
func (c *converter) reserve(i, rows, data int) {
	if f := c.flat[i]; f != nil {
		f.reserve(rows, data)
	}
}

// release frees the columns' memory.
func (c *converter) release() {
	for _, f := range c.flat {
		if f != nil {
			f.release()
		}
	}
	c.rb.Release()
}

// parser is a cursor over a record: the converter's parsing methods
// advance i.
type parser struct {
	b []byte
	i int
}

func (p *parser) ws() { p.i = jsonscan.SkipSpace(p.b, p.i) }

// syntaxErr is a syntax error at p.i. The parser's errors, its own and
// those of jsonscan's token functions, are *jsonscan.SyntaxError values
// until add makes them a *FieldError (fieldError).
func syntaxErr(p *parser, msg string) error {
	return &jsonscan.SyntaxError{Offset: p.i, Msg: msg}
}

// add converts one record. A non-nil error is a *FieldError and nothing
// was appended.
func (c *converter) add(rec []byte) error {
	c.scratch = c.scratch[:0]
	for i := range c.slots {
		c.slots[i].state = slotMissing
	}
	p := &c.p
	*p = parser{b: rec}
	c.unk = c.unk[:0]
	if err := c.check(p); err != nil {
		return fieldError(err)
	}
	c.appendRecord(rec)
	c.rows++
	if len(c.unk) > 0 {
		c.countDropped(rec)
	}
	return nil
}

// unknown handles key k0:k1 of rec, in struct n, that names none of its
// fields: an error naming its path with RejectUnknown, else noted for
// countDropped. Check phase only.
func (c *converter) unknown(n *node, rec []byte, k0, k1 int, esc bool) error {
	if c.drop == nil {
		key := rec[k0:k1]
		if esc {
			key = unescape(nil, key)
		}
		return &FieldError{Field: joinPath(n.path, string(key)), Problem: "not in the schema"}
	}
	c.unk = append(c.unk, unknownKey{n: n, k0: k0, k1: k1, esc: esc})
	return nil
}

// countDropped counts the dropped keys of the record just added, and
// passes their names to c.drop the first time this converter meets them
// (until it passed maxDroppedNames).
func (c *converter) countDropped(rec []byte) {
	c.drop.records.Add(1)
	c.drop.fields.Add(int64(len(c.unk)))
	for _, u := range c.unk {
		if c.nameN >= maxDroppedNames {
			return
		}
		key := rec[u.k0:u.k1]
		if u.esc {
			key = unescape(nil, key)
		}
		names := c.named[u.n]
		if names[string(key)] {
			continue
		}
		if names == nil {
			if c.named == nil {
				c.named = map[*node]map[string]bool{}
			}
			names = map[string]bool{}
			c.named[u.n] = names
		}
		names[string(key)] = true
		c.nameN++
		c.drop.addName(joinPath(u.n.path, string(key)))
	}
}

// check is the check phase of add: it parses the record at p into the
// slots, checking every value against the schema, and appends nothing.
func (c *converter) check(p *parser) error {
	rec := p.b
	p.ws()
	if p.i >= len(rec) || rec[p.i] != '{' {
		if p.i >= len(rec) {
			return &FieldError{Problem: "empty record"}
		}
		return &FieldError{Problem: "not a JSON object"}
	}
	p.i++
	p.ws()
	if p.i < len(rec) && rec[p.i] == '}' {
		p.i++
	} else if err := c.members(p); err != nil {
		return err
	}
	p.ws()
	if p.i != len(rec) {
		return syntaxErr(p, "data after the top-level value")
	}
	for i, n := range c.root.fields {
		if c.slots[i].state == slotMissing && !n.nullable {
			return fieldErr(n, "missing required field")
		}
	}
	return nil
}

// members parses the members of the record's object, from the first key
// to the closing '}', into the slots.
func (c *converter) members(p *parser) error {
	rec := p.b
	root := c.root
	guess := 0 // the field expected next: the one after the last seen
	for {
		idx := guess
		if m := root.matchKey(rec[p.i:], guess); m > 0 {
			p.i += m
		} else if k, err := c.key(p, guess); err == nil {
			idx = k
		} else {
			return err
		}
		// Compact JSON (no white space) goes straight on.
		if p.i < len(rec) && rec[p.i] == ':' {
			p.i++
		} else if err := p.colon(); err != nil {
			return err
		}
		if p.i < len(rec) && rec[p.i] <= ' ' {
			p.ws()
		}
		var err error
		switch {
		case idx < 0:
			err = p.skip(1)
		case root.fields[idx].kind < kList:
			guess = idx + 1
			err = c.scalar(p, root.fields[idx], &c.slots[idx])
		default:
			guess = idx + 1
			err = c.nested(p, idx)
		}
		if err != nil {
			return err
		}
		if p.i < len(rec) && rec[p.i] <= ' ' {
			p.ws()
		}
		if p.i >= len(rec) {
			return syntaxErr(p, "unexpected end of input in object")
		}
		switch rec[p.i] {
		case ',':
			p.i++
			if p.i < len(rec) && rec[p.i] <= ' ' {
				p.ws()
			}
		case '}':
			p.i++
			return nil
		default:
			return syntaxErr(p, "expected ',' or '}' in object")
		}
	}
}

// key parses a top-level key whose quoted text is not the one of field
// guess, and returns the index of its field (-1 for a key not in the
// schema, which unknown has handled).
func (c *converter) key(p *parser, guess int) (int, error) {
	k0, k1, esc, err := p.str()
	if err != nil {
		return 0, err
	}
	key := p.b[k0:k1]
	if esc {
		key = unescape(make([]byte, 0, k1-k0), key)
	}
	idx := c.root.lookup(key, guess)
	if idx < 0 {
		return idx, c.unknown(c.root, p.b, k0, k1, esc)
	}
	return idx, nil
}

// colon skips the white space and the ':' after a key.
func (p *parser) colon() error {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return syntaxErr(p, "expected ':' after key")
	}
	p.i++
	return nil
}

// nested checks the nested value (list or struct) of top-level field idx
// and keeps its span in the slot, for the append phase.
func (c *converter) nested(p *parser, idx int) error {
	start := p.i
	if err := c.value(p, c.root.fields[idx], nil, 1); err != nil {
		return err
	}
	sl := &c.slots[idx]
	sl.state = slotValue
	if p.b[start] == 'n' {
		sl.state = slotNull
	}
	sl.s0, sl.s1 = start, p.i
	return nil
}

// appendRecord is the append phase of add, which cannot fail: it moves
// the slots into the columns and appends the nested values.
func (c *converter) appendRecord(rec []byte) {
	for i, n := range c.root.fields {
		sl := &c.slots[i]
		if f := c.flat[i]; f != nil {
			if sl.state != slotValue {
				f.appendNull()
			} else if sl.inScratch {
				f.appendSlot(sl, c.scratch)
			} else {
				f.appendSlot(sl, rec)
			}
			continue
		}
		b := c.rb.Field(i)
		if sl.state != slotValue {
			b.AppendNull()
			continue
		}
		sub := parser{b: rec, i: sl.s0}
		_ = c.value(&sub, n, b, 1) // checked above
	}
}

var typeNames = [...]string{kInt32: "int32", kInt64: "int64", kFloat32: "float32", kFloat64: "float64", kBool: "bool", kString: "string", kBinary: "binary (a base64 string)", kTimestamp: "timestamp (a number or an RFC 3339 string)", kDate: "date (days since 1970-01-01 or \"YYYY-MM-DD\")", kDecimal: "decimal (a number or a decimal string)", kList: "a list (JSON array)", kStruct: "a struct (JSON object)", kMap: "a map (JSON object)"}

func wrongType(n *node, c byte) error {
	return fieldErr(n, "wrong type: want %s, got %s", typeNames[n.kind], jsonscan.KindOf(c))
}

// scalar parses one scalar value into sl, checking it against n.
func (c *converter) scalar(p *parser, n *node, sl *slot) error {
	if p.i >= len(p.b) {
		return syntaxErr(p, "unexpected end of input")
	}
	ch := p.b[p.i]
	if ch == 'n' {
		if err := p.lit("null"); err != nil {
			return err
		}
		if !n.nullable {
			return fieldErr(n, "null for a field that is not nullable")
		}
		sl.state = slotNull
		return nil
	}
	sl.state = slotValue
	switch n.kind {
	case kInt32, kInt64, kTimestamp:
		// The common case without a call: a short integer in range.
		if v, end, ok := jsonscan.ShortInt(p.b, p.i); ok && (n.kind != kInt32 || v >= math.MinInt32 && v <= math.MaxInt32) {
			p.i, sl.i = end, v
			return nil
		}
		if n.kind == kTimestamp {
			return timestampValue(p, n, sl, ch)
		}
		return intValue(p, n, sl, ch)
	case kFloat32, kFloat64:
		return floatValue(p, n, sl, ch)
	case kBool:
		return boolValue(p, n, sl, ch)
	case kString:
		if ch != '"' {
			return badValue(p, n, ch)
		}
		s, e, esc, err := p.str()
		if err != nil {
			return err
		}
		sl.inScratch, sl.s0, sl.s1 = false, s, e
		if esc {
			c.unescapeSlot(sl, p.b[s:e])
		}
		return nil
	case kBinary:
		return c.binaryValue(p, n, sl, ch)
	case kDate:
		return dateValue(p, n, sl, ch)
	case kDecimal:
		return decimalValue(p, n, sl, ch)
	}
	return fieldErr(n, "internal: not a scalar")
}

func isNumberStart(ch byte) bool { return ch == '-' || ch >= '0' && ch <= '9' }

// intValue parses an int32 or int64 value, starting with ch, into sl.i.
func intValue(p *parser, n *node, sl *slot, ch byte) error {
	if !isNumberStart(ch) {
		if ch == 't' || ch == 'f' || ch == '"' || ch == '{' || ch == '[' {
			return wrongType(n, ch)
		}
		return syntaxErr(p, "unexpected character")
	}
	if v, ok := p.shortInt(); ok {
		if n.kind == kInt32 && (v < math.MinInt32 || v > math.MaxInt32) {
			return fieldErr(n, "%d overflows %s", v, typeNames[n.kind])
		}
		sl.i = v
		return nil
	}
	s, e, isInt, err := p.number()
	if err != nil {
		return err
	}
	if !isInt {
		return fieldErr(n, "%s is not an integer", p.b[s:e])
	}
	v, ok := parseInt(p.b[s:e])
	if !ok || n.kind == kInt32 && (v < math.MinInt32 || v > math.MaxInt32) {
		return fieldErr(n, "%s overflows %s", p.b[s:e], typeNames[n.kind])
	}
	sl.i = v
	return nil
}

// floatValue parses a float32 or float64 value, starting with ch, into
// sl.f: a number, or the string "NaN", "Infinity" or "-Infinity" (as
// Avro's JSON encoding writes them).
func floatValue(p *parser, n *node, sl *slot, ch byte) error {
	if ch == '"' {
		return specialFloat(p, n, sl)
	}
	if !isNumberStart(ch) {
		return badValue(p, n, ch)
	}
	s, e, _, err := p.number()
	if err != nil {
		return err
	}
	if n.kind == kFloat64 {
		if f, ok := exactFloat64(p.b[s:e]); ok {
			sl.f = f
			return nil
		}
	}
	bits := 64
	if n.kind == kFloat32 {
		bits = 32
	}
	f, err := strconv.ParseFloat(string(p.b[s:e]), bits)
	if err != nil && math.IsInf(f, 0) {
		return fieldErr(n, "%s overflows %s", p.b[s:e], typeNames[n.kind])
	}
	sl.f = f
	return nil
}

// specialFloat parses the string at p.i, which must be "NaN", "Infinity"
// or "-Infinity", into sl.f.
func specialFloat(p *parser, n *node, sl *slot) error {
	s, e, _, err := p.str()
	if err != nil {
		return err
	}
	switch string(p.b[s:e]) {
	case "NaN":
		sl.f = math.NaN()
	case "Infinity":
		sl.f = math.Inf(1)
	case "-Infinity":
		sl.f = math.Inf(-1)
	default:
		return fieldErr(n, "wrong type: want %s, got a string other than \"NaN\", \"Infinity\" or \"-Infinity\"", typeNames[n.kind])
	}
	return nil
}

// boolValue parses a bool value, starting with ch, into sl.i (1 or 0).
func boolValue(p *parser, n *node, sl *slot, ch byte) error {
	switch ch {
	case 't':
		sl.i = 1
		return p.lit("true")
	case 'f':
		sl.i = 0
		return p.lit("false")
	}
	return badValue(p, n, ch)
}

// unescapeSlot decodes the string contents raw into the scratch buffer,
// spanned by sl.
func (c *converter) unescapeSlot(sl *slot, raw []byte) {
	sl.inScratch, sl.s0 = true, len(c.scratch)
	c.scratch = unescape(c.scratch, raw)
	sl.s1 = len(c.scratch)
}

// binaryValue parses a base64 string value, starting with ch, and decodes
// it into the scratch buffer, spanned by sl.
func (c *converter) binaryValue(p *parser, n *node, sl *slot, ch byte) error {
	if ch != '"' {
		return badValue(p, n, ch)
	}
	s, e, esc, err := p.str()
	if err != nil {
		return err
	}
	src := p.b[s:e]
	if esc {
		c.tmp = unescape(c.tmp[:0], src)
		src = c.tmp
	}
	mark := len(c.scratch)
	c.scratch = append(c.scratch, make([]byte, base64.StdEncoding.DecodedLen(len(src)))...)
	m, err := base64.StdEncoding.Decode(c.scratch[mark:], src)
	if err != nil {
		c.scratch = c.scratch[:mark]
		return fieldErr(n, "invalid base64: %v", err)
	}
	c.scratch = c.scratch[:mark+m]
	sl.inScratch, sl.s0, sl.s1 = true, mark, mark+m
	return nil
}

// timestampValue parses a timestamp, starting with ch, into sl.i in n's
// unit: an integer number of units or an RFC 3339 string.
func timestampValue(p *parser, n *node, sl *slot, ch byte) error {
	switch {
	case isNumberStart(ch):
		if v, ok := p.shortInt(); ok {
			sl.i = v
			return nil
		}
		s, e, isInt, err := p.number()
		if err != nil {
			return err
		}
		if !isInt {
			return fieldErr(n, "%s is not an integer number of %s", p.b[s:e], unitName(n.unit))
		}
		v, ok := parseInt(p.b[s:e])
		if !ok {
			return fieldErr(n, "%s overflows int64", p.b[s:e])
		}
		sl.i = v
		return nil
	case ch == '"':
		return rfc3339Value(p, n, sl)
	}
	return badValue(p, n, ch)
}

// rfc3339Value parses an RFC 3339 timestamp string into sl.i in n's unit.
func rfc3339Value(p *parser, n *node, sl *slot) error {
	s, e, esc, err := p.str()
	if err != nil {
		return err
	}
	if esc {
		return fieldErr(n, "invalid RFC 3339 timestamp %s", p.b[s-1:e+1])
	}
	t, err := time.Parse(time.RFC3339Nano, string(p.b[s:e]))
	if err != nil {
		return fieldErr(n, "invalid RFC 3339 timestamp %q", p.b[s:e])
	}
	v, ok := timeIn(t, n.unit)
	if !ok {
		return fieldErr(n, "%q is out of range for %s", p.b[s:e], unitName(n.unit))
	}
	sl.i = v
	return nil
}

// dateValue parses a date, starting with ch, into sl.i (days since
// 1970-01-01): a day number or a "YYYY-MM-DD" string.
func dateValue(p *parser, n *node, sl *slot, ch byte) error {
	switch {
	case isNumberStart(ch):
		s, e, isInt, err := p.number()
		if err != nil {
			return err
		}
		v, ok := parseInt(p.b[s:e])
		if !isInt || !ok || v < math.MinInt32 || v > math.MaxInt32 {
			return fieldErr(n, "%s is not a day number (int32)", p.b[s:e])
		}
		sl.i = v
		return nil
	case ch == '"':
		s, e, _, err := p.str()
		if err != nil {
			return err
		}
		v, ok := parseDate(p.b[s:e])
		if !ok {
			return fieldErr(n, "invalid date %s (want \"YYYY-MM-DD\")", p.b[s-1:e+1])
		}
		sl.i = v
		return nil
	}
	return badValue(p, n, ch)
}

// decimalValue parses a decimal, starting with ch, into sl.dec: a number
// or a string holding one.
func decimalValue(p *parser, n *node, sl *slot, ch byte) error {
	var s, e int
	var err error
	switch {
	case isNumberStart(ch):
		s, e, _, err = p.number()
	case ch == '"':
		s, e, err = decimalString(p, n)
	default:
		return badValue(p, n, ch)
	}
	if err != nil {
		return err
	}
	v, problem := parseDecimal(p.b[s:e], n.prec, n.scale)
	if problem != "" {
		return fieldErr(n, "%s %s", p.b[s:e], problem)
	}
	sl.dec = v
	return nil
}

// decimalString parses a string that must hold exactly one JSON number
// (no escapes) and returns the span of the number.
func decimalString(p *parser, n *node) (s, e int, err error) {
	var esc bool
	if s, e, esc, err = p.str(); err != nil {
		return 0, 0, err
	}
	q := parser{b: p.b[:e], i: s}
	if esc || s == e || !isNumberStart(q.b[s]) {
		return 0, 0, fieldErr(n, "%s is not a decimal number", p.b[s-1:e+1])
	}
	if _, _, _, err := q.number(); err != nil || q.i != e {
		return 0, 0, fieldErr(n, "%s is not a decimal number", p.b[s-1:e+1])
	}
	return s, e, nil
}

func badValue(p *parser, n *node, ch byte) error {
	switch ch {
	case '"', '{', '[', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return wrongType(n, ch)
	}
	return syntaxErr(p, "unexpected character "+strconv.QuoteRune(rune(ch)))
}
