package metrics

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filesink/filesink/source"
)

// ValueCounts are the totals of a job whose record values are decoded
// (--value-format avro).
type ValueCounts struct {
	decodeErrors  atomic.Int64
	schemaChanges atomic.Int64
}

// SchemaChanged counts a change of the records' schema that added columns
// (the job opened again with them). Safe for concurrent use.
func (c *ValueCounts) SchemaChanged() { c.schemaChanges.Add(1) }

// Values registers the metrics of decoded values and returns dec wrapped
// to count the values it refuses as bad records, and the counts to report
// schema changes to. Call it once per Metrics.
func (m *Metrics) Values(dec source.ValueDecoder) (source.ValueDecoder, *ValueCounts) {
	c := &ValueCounts{}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "filesink_value_decode_errors_total",
			Help: "Record values that did not decode (--value-format avro: not in the wire format, an unknown schema id, a body that does not match its schema): bad records."},
			func() float64 { return float64(c.decodeErrors.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "filesink_schema_changes_total",
			Help: "Changes of the records' schema that added columns: the job took a checkpoint, rolled its files and opened again with them."},
			func() float64 { return float64(c.schemaChanges.Load()) }),
	)
	return countingDecoder{dec: dec, c: c}, c
}

type countingDecoder struct {
	dec source.ValueDecoder
	c   *ValueCounts
}

func (d countingDecoder) Decode(ctx context.Context, dst, value []byte) ([]byte, source.Schema, error) {
	out, sch, err := d.dec.Decode(ctx, dst, value)
	if err != nil && errors.Is(err, source.ErrBadRecord) {
		d.c.decodeErrors.Add(1)
	}
	return out, sch, err
}
