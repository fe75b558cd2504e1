package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ValueDecoder turns a record's value, as its source read it, into the
// record the sinks take (a JSON object for the bulk formats): Avro in the
// Confluent wire format (source/avro), or anything a value format needs.
// Decode appends the decoded record to dst. An error matching
// ErrBadRecord is about the record (it goes to the dead-letter output
// with --on-bad-record skip); any other error stops the read and says
// nothing of the record (a schema registry that cannot be reached).
//
// Decode also returns the schema the value was written with (the zero
// Schema for a format without one). An error that is not about the record
// leaves the record to be decoded again: the source's next call to Next
// retries it, and its Position fails meanwhile (a checkpoint never covers
// a record the sinks did not get).
type ValueDecoder interface {
	Decode(ctx context.Context, dst, value []byte) ([]byte, Schema, error)
}

// Schema names the schema of a decoded value: its id in the schema
// registry and its version under the value's subject (0: not known).
type Schema struct {
	ID      int `json:"id"`
	Version int `json:"version,omitempty"`
}

func (s Schema) String() string {
	if s.Version == 0 {
		return fmt.Sprintf("id %d", s.ID)
	}
	return fmt.Sprintf("v%d (id %d)", s.Version, s.ID)
}

// ErrSchemaChanged is matched by the error a ValueDecoder returns for the
// first value of a schema that changes what the records are written as
// (new columns): the value is not delivered. A pipeline ends its run at
// the last batch it read whole, with a final checkpoint (the files roll),
// and returns the error; its caller opens the job again with the new
// schema, and the source gives the value again from the checkpoint.
var ErrSchemaChanged = errors.New("the records' schema changed")

// UndecodableError reports a record whose value its decoder refused
// (ErrBadRecord): the source has read past it, the next call to Next
// returns the record after it, and Position covers it. It is not sticky.
// It matches ErrBadRecord.
type UndecodableError struct {
	Origin Origin
	Value  []byte // the value as read; the error owns it
	Err    error  // the decoder's reason
}

func (e *UndecodableError) Error() string {
	return fmt.Sprintf("source: %s: value does not decode: %v", e.Origin, e.Err)
}

// Unwrap returns the decoder's reason.
func (e *UndecodableError) Unwrap() error { return e.Err }

// Is reports a match with ErrBadRecord.
func (e *UndecodableError) Is(target error) bool { return target == ErrBadRecord }

// Decoded returns src with every record's value decoded by dec: the
// sinks never know which decoder fed them. A value dec refuses as a bad
// record is returned as an *UndecodableError (the caller sends it to the
// dead-letter output, or stops); any other decode error is returned as
// it is, and the next call to Next decodes the same record again
// (Position fails until it does). Position is src's, with the schemas
// seen per input (Kafka: per partition) when there are any; seen holds
// those a checkpoint recorded (SplitDecodedPosition). Replayable and
// Describe are src's. Not safe for concurrent use, like any Source.
func Decoded(src Source, dec ValueDecoder, seen map[string][]Schema, opts ...DecodeOption) Source {
	d := &decoded{Source: src, codec: newCodec(dec, opts), seen: map[string][]Schema{}}
	for k, v := range seen {
		d.seen[k] = append([]Schema(nil), v...)
	}
	return d
}

type decoded struct {
	Source
	*codec
	buf     []byte
	pending *Record // read, not decoded: a decode error that was not about it
	seen    map[string][]Schema
	// last is the input and schema of the previous value: most values
	// repeat it, and skip the look-up in seen.
	lastName   string
	lastSchema Schema
}

func (d *decoded) Next(ctx context.Context) (Record, error) {
	var rec Record
	if d.pending != nil {
		rec = *d.pending
	} else {
		var err error
		if rec, err = d.Source.Next(ctx); err != nil {
			return rec, err
		}
	}
	out, sch, err := d.decode(ctx, d.buf[:0], rec)
	if err != nil && d.within != nil && d.within.Err() == nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Next's context ended while the decoder waited (a registry
		// that cannot be reached): the record is read, go on waiting.
		out, sch, err = d.decode(d.within, d.buf[:0], rec)
	}
	if errors.Is(err, ErrBadRecord) {
		d.pending = nil
		return Record{}, &UndecodableError{Origin: rec.Origin, Value: append([]byte(nil), rec.Value...), Err: err}
	}
	if err != nil {
		if d.pending == nil {
			rec.Value = append([]byte(nil), rec.Value...)
			rec.Key = append([]byte(nil), rec.Key...)
			d.pending = &rec
		}
		return Record{}, fmt.Errorf("source: %s: %w", rec.Origin, err)
	}
	d.pending = nil
	d.buf = out
	if sch != (Schema{}) && (sch != d.lastSchema || rec.Origin.Name != d.lastName) {
		d.note(rec.Origin.Name, sch)
	}
	return Record{Value: out, Origin: rec.Origin}, nil
}

// note records that the values of input use sch.
func (d *decoded) note(input string, sch Schema) {
	d.lastName, d.lastSchema = input, sch
	for _, s := range d.seen[input] {
		if s.ID == sch.ID {
			return
		}
	}
	d.seen[input] = append(d.seen[input], sch)
}

// decodedKey starts the encoding of a Decoded source's position.
const decodedKey = `{"filesink_schemas":`

type decodedPosition struct {
	Schemas map[string][]Schema `json:"filesink_schemas"`
	Source  json.RawMessage     `json:"source"`
}

// Position is the wrapped source's, with the schemas seen per input. It
// fails while a record read is not decoded.
func (d *decoded) Position() (json.RawMessage, error) {
	if d.pending != nil {
		return nil, fmt.Errorf("source: %s: read, and not decoded yet", d.pending.Origin)
	}
	pos, err := d.Source.Position()
	if err != nil || len(d.seen) == 0 || pos == nil {
		return pos, err // nil: not replayable
	}
	return json.Marshal(decodedPosition{Schemas: d.seen, Source: pos})
}

// SplitDecodedPosition splits a position of a Decoded source into the
// wrapped source's and the schemas seen per input (nil for a position of
// another source, returned as it is).
func SplitDecodedPosition(pos json.RawMessage) (json.RawMessage, map[string][]Schema, error) {
	if !bytes.HasPrefix(pos, []byte(decodedKey)) {
		return pos, nil, nil
	}
	var p decodedPosition
	if err := json.Unmarshal(pos, &p); err != nil {
		return nil, nil, fmt.Errorf("source: a decoded source's position: %w", err)
	}
	return p.Source, p.Schemas, nil
}

// Describe names the source and says its values are decoded.
func (d *decoded) Describe() string { return d.Source.Describe() + " (values decoded)" }

// DecodedReplayer returns r with every value decoded by dec, for a source
// that Decoded wraps: a part rebuilt from the source holds the decoded
// records, as the part written first did. A value dec refuses as a bad
// record is passed over (it went to the dead-letter output, not into a
// part); dec's other failures end the replay.
func DecodedReplayer(r Replayer, dec ValueDecoder, opts ...DecodeOption) Replayer {
	if r == nil {
		return nil
	}
	return decodedReplayer{r: r, dec: dec, opts: opts}
}

type decodedReplayer struct {
	r    Replayer
	dec  ValueDecoder
	opts []DecodeOption
}

func (d decodedReplayer) Replay(ctx context.Context, input string, runs [][2]int64, fn func(Record) error) error {
	var buf []byte
	c := newCodec(d.dec, d.opts)
	return d.r.Replay(ctx, input, runs, func(rec Record) error {
		out, _, err := c.decode(ctx, buf[:0], rec)
		if errors.Is(err, ErrBadRecord) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("source: %s: %w", rec.Origin, err)
		}
		buf = out
		return fn(Record{Value: out, Origin: rec.Origin})
	})
}

// DecodeOption changes how Decoded and DecodedReplayer decode records.
type DecodeOption func(*codec)

// DecodeWithin makes Decoded decode a record it has read within ctx
// rather than Next's context alone: a Next whose context ends while the
// decoder waits (a schema registry that cannot be reached; a pipeline
// bounds its wait for the next record, and ends it at a graceful stop)
// goes on decoding under ctx, which only ends with the run, so that the
// next batch does not wait for a record left pending. DecodedReplayer
// ignores it.
func DecodeWithin(ctx context.Context) DecodeOption {
	return func(c *codec) { c.within = ctx }
}

// WithKeys adds each record's key, decoded by dec, to the decoded value
// (a JSON object) as its first field, named field; a record without a
// key gets null. A key dec refuses as a bad record makes the record bad.
func WithKeys(dec ValueDecoder, field string) DecodeOption {
	name, _ := json.Marshal(field) // a string always marshals
	return func(c *codec) { c.keys, c.keyName = dec, append(name, ':') }
}

// codec decodes a record's value and, with WithKeys, its key. Not safe
// for concurrent use.
type codec struct {
	dec     ValueDecoder
	keys    ValueDecoder
	keyName []byte          // the JSON of the key's field name and its colon
	within  context.Context // DecodeWithin
	kbuf    []byte
	rest    []byte
}

func newCodec(dec ValueDecoder, opts []DecodeOption) *codec {
	c := &codec{dec: dec}
	for _, o := range opts {
		o(c)
	}
	return c
}

// decode appends the decoded record of rec to dst.
func (c *codec) decode(ctx context.Context, dst []byte, rec Record) ([]byte, Schema, error) {
	out, sch, err := c.dec.Decode(ctx, dst, rec.Value)
	if err != nil || c.keys == nil {
		return out, sch, err
	}
	start := len(dst)
	if len(out) < start+2 || out[start] != '{' {
		return dst, sch, fmt.Errorf("%w: the value is not an object: the key cannot be added to it", ErrBadRecord)
	}
	key := []byte("null")
	if rec.Key != nil {
		if c.kbuf, _, err = c.keys.Decode(ctx, c.kbuf[:0], rec.Key); err != nil {
			return dst, sch, fmt.Errorf("key: %w", err)
		}
		key = c.kbuf
	}
	c.rest = append(c.rest[:0], out[start+1:]...) // the value's fields and its closing brace
	out = append(append(append(out[:start], '{'), c.keyName...), key...)
	if len(c.rest) > 1 {
		out = append(out, ',')
	}
	return append(out, c.rest...), sch, nil
}
