package source

import (
	"context"
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
type ValueDecoder interface {
	Decode(ctx context.Context, dst, value []byte) ([]byte, error)
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
// it is and is sticky, like a read error. Position, Replayable and
// Describe are src's. Not safe for concurrent use, like any Source.
func Decoded(src Source, dec ValueDecoder) Source {
	return &decoded{Source: src, dec: dec}
}

type decoded struct {
	Source
	dec ValueDecoder
	buf []byte
	err error
}

func (d *decoded) Next(ctx context.Context) (Record, error) {
	if d.err != nil {
		return Record{}, d.err
	}
	rec, err := d.Source.Next(ctx)
	if err != nil {
		return rec, err
	}
	out, err := d.dec.Decode(ctx, d.buf[:0], rec.Value)
	if errors.Is(err, ErrBadRecord) {
		return Record{}, &UndecodableError{Origin: rec.Origin, Value: append([]byte(nil), rec.Value...), Err: err}
	}
	if err != nil {
		d.err = fmt.Errorf("source: %s: %w", rec.Origin, err)
		return Record{}, d.err
	}
	d.buf = out
	return Record{Value: out, Origin: rec.Origin}, nil
}

// Describe names the source and says its values are decoded.
func (d *decoded) Describe() string { return d.Source.Describe() + " (values decoded)" }

// DecodedReplayer returns r with every value decoded by dec, for a source
// that Decoded wraps: a part rebuilt from the source holds the decoded
// records, as the part written first did. A value dec refuses as a bad
// record is passed over (it went to the dead-letter output, not into a
// part); dec's other failures end the replay.
func DecodedReplayer(r Replayer, dec ValueDecoder) Replayer {
	if r == nil {
		return nil
	}
	return decodedReplayer{r: r, dec: dec}
}

type decodedReplayer struct {
	r   Replayer
	dec ValueDecoder
}

func (d decodedReplayer) Replay(ctx context.Context, input string, runs [][2]int64, fn func(Record) error) error {
	var buf []byte
	return d.r.Replay(ctx, input, runs, func(rec Record) error {
		out, err := d.dec.Decode(ctx, buf[:0], rec.Value)
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
