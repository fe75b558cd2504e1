package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

// hexDecoder decodes "v:N" into {"id":N}; anything else is a bad record.
type hexDecoder struct{}

func (hexDecoder) Decode(_ context.Context, dst, value []byte) ([]byte, source.Schema, error) {
	n, ok := strings.CutPrefix(string(value), "v:")
	if !ok {
		return dst, source.Schema{}, fmt.Errorf("%w: no v: prefix", source.ErrBadRecord)
	}
	return fmt.Appendf(dst, `{"id":%s}`, n), source.Schema{}, nil
}

// Values a decoder refuses go to the dead-letter output exactly once, in
// their place, with the value as read; the decoded records go to the
// part files; without a dead-letter output the run stops naming the record.
func TestRunDecodedSource(t *testing.T) {
	ctx := context.Background()
	const count = 100
	var in []string
	for i := range count {
		v := fmt.Sprintf("v:%d", i)
		if i%10 == 7 {
			v = fmt.Sprintf("garbage-%d", i)
		}
		in = append(in, v)
	}
	open := func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
		src, err := lines("in/a.bin", in)(ctx, pos)
		if err != nil {
			return nil, err
		}
		return source.Decoded(src, hexDecoder{}, nil), nil
	}

	e, mem := memEnv(t)
	if _, err := pipeline.Run(ctx, e.config(e.sinks(t, 1), open)); !errors.Is(err, source.ErrBadRecord) || !strings.Contains(err.Error(), "in/a.bin:8") {
		t.Fatalf("without a dead-letter output: %v, want a bad record naming in/a.bin:8", err)
	}

	e, mem = memEnv(t)
	dead := localfs.New(mem, e.root+"/_dead-letter")
	res, err := pipeline.Run(ctx, e.config(e.sinks(t, 1, filesink.WithDeadLetter(dead)), open))
	if err != nil {
		t.Fatal(err)
	}
	var good, bad int
	for _, data := range visible(t, e) {
		good += strings.Count(data, `{"id":`)
	}
	ents, err := mem.ReadDir(e.root + "/_dead-letter")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		if d.IsDir() || d.Name()[0] == '.' || d.Name()[0] == '_' {
			continue
		}
		data, err := vfs.ReadFile(mem, e.root+"/_dead-letter/"+d.Name())
		if err != nil {
			t.Fatal(err)
		}
		bad += strings.Count(string(data), "garbage-")
	}
	if good != 90 || bad != 10 {
		t.Errorf("%d decoded records in part files and %d dead letters, want 90 and 10 (result %+v)", good, bad, res)
	}
}

// changingDecoder is hexDecoder that reports a schema change for the
// value at, once.
type changingDecoder struct {
	at      string
	changed bool
}

func (d *changingDecoder) Decode(ctx context.Context, dst, value []byte) ([]byte, source.Schema, error) {
	if string(value) == d.at && !d.changed {
		d.changed = true
		return dst, source.Schema{}, fmt.Errorf("new column: %w", source.ErrSchemaChanged)
	}
	return hexDecoder{}.Decode(ctx, dst, value)
}

// A schema change ends the run with a final checkpoint of the batches
// read before it and returns the change; the next run from that
// checkpoint reads the records of the dropped partial batch again:
// every record once, in two sets of part files.
func TestRunSchemaChangeRestarts(t *testing.T) {
	ctx := context.Background()
	const count = 100
	var in []string
	for i := range count {
		in = append(in, fmt.Sprintf("v:%d", i))
	}
	dec := &changingDecoder{at: "v:53"}
	open := func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
		src, err := lines("in/a.bin", in)(ctx, pos)
		if err != nil {
			return nil, err
		}
		return source.Decoded(src, dec, nil), nil
	}
	e, _ := memEnv(t)
	cfg := e.config(e.sinks(t, 1), open)
	cfg.BatchSize = 8
	res, err := pipeline.Run(ctx, cfg)
	if !errors.Is(err, source.ErrSchemaChanged) || res.Checkpoint == 0 {
		t.Fatalf("first run: %+v, %v; want the change after a checkpoint", res, err)
	}
	first := visible(t, e)
	var n int
	for _, data := range first {
		n += strings.Count(data, `{"id":`)
	}
	if n != 48 {
		t.Errorf("the first run published %d records, want 48 (the six whole batches before the change)", n)
	}
	cfg = e.config(e.sinks(t, 1), open)
	cfg.BatchSize = 8
	if res, err = pipeline.Run(ctx, cfg); err != nil || !res.EndOfInput {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	seen := map[string]int{}
	all := visible(t, e)
	for _, data := range all {
		for _, line := range strings.Fields(data) {
			seen[line]++
		}
	}
	for i := range count {
		if k := fmt.Sprintf(`{"id":%d}`, i); seen[k] != 1 {
			t.Errorf("%s published %d times", k, seen[k])
		}
	}
	if len(all) <= len(first) {
		t.Errorf("%d part files after the change, %d before: the change did not roll the files", len(all), len(first))
	}
}
