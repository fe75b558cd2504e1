package bulk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/filesink/filesink/filesink"
)

// callerWriter is an io.Writer that must only be called during a call of
// the bulk writer on the test's goroutine: inCall is a plain bool (the race
// detector reports a Write from another goroutine), and a Write outside a
// call is an error.
type callerWriter struct {
	buf    bytes.Buffer
	inCall bool
	stray  int
	fail   error // returned by Write once set

	// With lend set, callerWriter is a filesink.Lender that lends itself:
	// the lent writer counts a write outside a loan as a stray one, and
	// a Write of the caller's during a loan too.
	lend      bool
	lentFail  error         // returned by the lent writer (set before the first Add)
	gate      chan struct{} // if set, the first lent write waits for it
	lentNow   bool
	loans     int
	lentBytes int
}

var _ filesink.Lender = (*callerWriter)(nil)

func (c *callerWriter) Lend() io.Writer {
	if c.lentNow { // lent twice
		c.stray++
	}
	if !c.lend || !c.inCall || c.lentNow {
		return nil
	}
	c.lentNow = true
	c.loans++
	return lentWriter{c}
}

func (c *callerWriter) Return() {
	if !c.lentNow || !c.inCall {
		c.stray++
	}
	c.lentNow = false
}

// lentWriter is callerWriter's lent writer, written on the encoding
// goroutine (the race detector reports any write not ordered with the
// caller's use of the buffer).
type lentWriter struct{ c *callerWriter }

func (l lentWriter) Write(p []byte) (int, error) {
	if !l.c.lentNow {
		l.c.stray++
	}
	if l.c.lentFail != nil {
		return 0, l.c.lentFail
	}
	if g := l.c.gate; g != nil {
		l.c.gate = nil
		<-g
	}
	l.c.lentBytes += len(p)
	return l.c.buf.Write(p)
}

func (c *callerWriter) Write(p []byte) (int, error) {
	if !c.inCall || c.lentNow {
		c.stray++
	}
	if c.fail != nil {
		return 0, c.fail
	}
	return c.buf.Write(p)
}

func (c *callerWriter) call(f func() error) error {
	c.inCall = true
	defer func() { c.inCall = false }()
	return f()
}

// needPipeline makes the Parquet writers of a test pipeline their
// encoding: on a machine with one CPU it raises GOMAXPROCS to 2 for the
// test (writers decide at NewParquetWriter), rather than skip it.
func needPipeline(t *testing.T) {
	t.Helper()
	if prev := runtime.GOMAXPROCS(0); prev < 2 {
		runtime.GOMAXPROCS(2)
		t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	}
}

// sequentialFormat is f with its pipeline turned off.
func sequentialFormat(f *ParquetFormat) *ParquetFormat {
	g := *f
	g.sequential = true
	return &g
}

// pipelineCase writes recs (and, at addArrowAt, an Arrow batch of
// recs[i:j]) with a Flush every flushEvery rows (0: none).
type pipelineCase struct {
	name       string
	opts       []Option
	n          int
	flushEvery int
	arrowAt    int // add recs[arrowAt:arrowAt+arrowN] as one Arrow batch
	arrowN     int
	lend       bool // the io.Writer lends itself (filesink.Lender)
}

// set returns what the case's options set, without the defaults.
func (c pipelineCase) set() config {
	var set config
	for _, o := range c.opts {
		o.apply(&set)
	}
	return set
}

func writeCase(t *testing.T, f *ParquetFormat, s *Schema, c pipelineCase, recs [][]byte) []byte {
	t.Helper()
	out := callerWriter{lend: c.lend}
	w, err := f.NewParquetWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	var batch arrow.Record
	if c.arrowN > 0 {
		conv := dropConverter(s, memory.DefaultAllocator)
		for _, r := range recs[c.arrowAt : c.arrowAt+c.arrowN] {
			if err := conv.add(r); err != nil {
				t.Fatal(err)
			}
		}
		batch = conv.record()
		conv.release()
		defer batch.Release()
	}
	for i := 0; i < len(recs); i++ {
		if batch != nil && i == c.arrowAt {
			if err := out.call(func() error { return w.AddArrow(batch) }); err != nil {
				t.Fatal(err)
			}
			i += c.arrowN - 1
			continue
		}
		if err := out.call(func() error { return w.Add(recs[i]) }); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if c.flushEvery > 0 && (i+1)%c.flushEvery == 0 {
			if err := out.call(w.Flush); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := out.call(w.Close); err != nil {
		t.Fatal(err)
	}
	if out.stray > 0 {
		t.Errorf("%s: the io.Writer was called %d times outside the writer's calls or its loans", c.name, out.stray)
	}
	if out.lentNow {
		t.Errorf("%s: the io.Writer is still lent after Close", c.name)
	}
	set := c.set()
	ended := set.rowGroupRows > 0 || set.rowGroupBytes > 0 // row groups ended by Add
	if c.lend && !f.sequential && ended && (out.loans == 0 || out.lentBytes == 0) {
		t.Errorf("%s: %d loans, %d bytes written by the encoding goroutine: the pipeline did not borrow the io.Writer", c.name, out.loans, out.lentBytes)
	}
	return out.buf.Bytes()
}

// The pipelined writer writes the same bytes as the sequential one, for
// row groups ended by rows, by bytes, by Flush, and with Arrow batches.
func TestPipelineSameBytes(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	cases := []pipelineCase{
		{name: "rows", opts: []Option{WithRowGroupRows(97)}, n: 3000},
		{name: "rows-zstd-dict", opts: []Option{WithRowGroupRows(500), WithCompression(Zstd), WithDictionary(DictOn)}, n: 3000},
		{name: "bytes", opts: []Option{WithRowGroupBytes(96 << 10)}, n: 4000},
		{name: "bytes-flush", opts: []Option{WithRowGroupBytes(128 << 10)}, n: 4000, flushEvery: 700},
		{name: "rows-flush-arrow", opts: []Option{WithRowGroupRows(300)}, n: 3000, flushEvery: 1100, arrowAt: 1500, arrowN: 450},
		{name: "one-row-groups", opts: []Option{WithRowGroupRows(1)}, n: 200},
		{name: "default", opts: nil, n: 2000},
	}
	for _, c := range cases {
		lent := c
		lent.name, lent.lend = c.name+"-lent", true
		cases = append(cases, lent)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs := genRecords(c.n, 11)
			f, err := Parquet(s, append(c.opts, WithUnknownFields(DropUnknown))...)
			if err != nil {
				t.Fatal(err)
			}
			got := writeCase(t, f, s, c, recs)
			want := writeCase(t, sequentialFormat(f), s, c, recs)
			if !bytes.Equal(got, want) {
				t.Fatalf("pipelined: %d bytes, sequential: %d bytes, not the same", len(got), len(want))
			}
			back, groups := readParquet(t, s, got)
			if rows := c.set().rowGroupRows; rows > 0 && groups < c.n/rows {
				t.Errorf("%d row groups", groups)
			}
			compareRecords(t, s, back, expectRows(t, s, recs))
			release(back)
		})
	}
}

// Encoded row groups reach the io.Writer while rows are still being
// added, not only at Flush or Close.
func TestPipelineWritesAsItGoes(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	recs := genRecords(2000, 12)
	f, _ := Parquet(s, WithRowGroupRows(100), WithUnknownFields(DropUnknown))
	var out callerWriter
	w, _ := f.NewParquetWriter(&out)
	for i, r := range recs {
		if err := out.call(func() error { return w.Add(r) }); err != nil {
			t.Fatal(err)
		}
		// After the third row group ends, the first was collected
		// (ending a row group waits for the previous encode).
		if i == 300 && out.buf.Len() < 4<<10 {
			t.Errorf("%d bytes written after 3 row groups", out.buf.Len())
		}
	}
	if err := out.call(w.Close); err != nil {
		t.Fatal(err)
	}
	if out.stray > 0 {
		t.Errorf("the io.Writer was called %d times outside the writer's calls", out.stray)
	}
}

// waitGoroutines waits until at most n goroutines run.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the writer", runtime.NumGoroutine(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// An error of the encoding goroutine surfaces on a later call, breaks the
// writer, and Close still stops the goroutine and releases the rows.
func TestPipelineEncodeError(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	recs := genRecords(2000, 13)
	f, _ := Parquet(s, WithRowGroupRows(100), WithUnknownFields(DropUnknown))
	boom := errors.New("boom")
	for _, failAt := range []int{1, 3} {
		t.Run(fmt.Sprint(failAt), func(t *testing.T) {
			before := runtime.NumGoroutine()
			var out callerWriter
			w, _ := f.NewParquetWriter(&out)
			groups := 0
			w.encoder = func(recs []arrow.Record) error {
				groups++
				if groups == failAt {
					return boom
				}
				return w.encode(recs)
			}
			var err error
			added := 0
			for _, r := range recs {
				if err = out.call(func() error { return w.Add(r) }); err != nil {
					break
				}
				added++
			}
			if !errors.Is(err, boom) {
				t.Fatalf("Add: %v, want the encode's error", err)
			}
			// Row group failAt ends at row 100*failAt; the error is
			// collected at the latest when the next one ends.
			if added > 100*(failAt+1) {
				t.Errorf("the error came at row %d", added)
			}
			if err := out.call(w.Flush); !errors.Is(err, boom) {
				t.Errorf("Flush after the error: %v", err)
			}
			if err := out.call(w.Close); !errors.Is(err, boom) {
				t.Errorf("Close after the error: %v", err)
			}
			if w.buf.buffered() != 0 || w.pipe.job != nil || w.pipe.spool.held.Load() != 0 {
				t.Errorf("after Close: rows %d bytes, job %v, spool %d bytes", w.buf.buffered(), w.pipe.job, w.pipe.spool.held.Load())
			}
			waitGoroutines(t, before)
		})
	}
}

// An error of the io.Writer while draining the encoder's bytes breaks the
// writer; Close waits for the encode and releases everything.
func TestPipelineWriteError(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	recs := genRecords(1500, 14)
	f, _ := Parquet(s, WithRowGroupRows(200), WithUnknownFields(DropUnknown))
	before := runtime.NumGoroutine()
	var out callerWriter
	w, _ := f.NewParquetWriter(&out)
	full := errors.New("disk full")
	var err error
	for i, r := range recs {
		if i == 250 { // row group 1 is being encoded or done
			out.fail = full
		}
		if err = out.call(func() error { return w.Add(r) }); err != nil {
			break
		}
	}
	if err == nil {
		err = out.call(w.Flush)
	}
	if !errors.Is(err, full) {
		t.Fatalf("error %v, want the io.Writer's", err)
	}
	if err := out.call(w.Close); !errors.Is(err, full) {
		t.Errorf("Close: %v", err)
	}
	if w.buf.buffered() != 0 || w.pipe.job != nil {
		t.Errorf("after Close: %d bytes of rows, job %v", w.buf.buffered(), w.pipe.job)
	}
	waitGoroutines(t, before)
	if out.stray > 0 {
		t.Errorf("the io.Writer was called %d times outside the writer's calls", out.stray)
	}
}

// An error of the lent writer (written on the encoding goroutine) is
// returned by a later call, and Close leaves no goroutine and no loan.
func TestPipelineLentWriteError(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	recs := genRecords(1500, 14)
	f, _ := Parquet(s, WithRowGroupRows(200), WithUnknownFields(DropUnknown))
	before := runtime.NumGoroutine()
	full := errors.New("disk full")
	out := callerWriter{lend: true, lentFail: full}
	w, _ := f.NewParquetWriter(&out)
	var err error
	for _, r := range recs {
		if err = out.call(func() error { return w.Add(r) }); err != nil {
			break
		}
	}
	if err == nil {
		err = out.call(w.Flush)
	}
	if !errors.Is(err, full) {
		t.Fatalf("error %v, want the lent writer's", err)
	}
	if err := out.call(w.Close); !errors.Is(err, full) {
		t.Errorf("Close: %v", err)
	}
	waitGoroutines(t, before)
	if out.loans == 0 || out.lentNow || out.stray > 0 {
		t.Errorf("%d loans, lent after Close %v, %d stray writes", out.loans, out.lentNow, out.stray)
	}
}

// Close right after Add ended a row group (its encode in flight) writes
// a complete file; no goroutine is left.
func TestPipelineCloseWithoutFlush(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	f, _ := Parquet(s, WithRowGroupRows(250), WithUnknownFields(DropUnknown))
	for _, n := range []int{250, 251, 1000, 1234} {
		before := runtime.NumGoroutine()
		recs := genRecords(n, uint64(n))
		c := pipelineCase{name: fmt.Sprint(n), n: n}
		got := writeCase(t, f, s, c, recs)
		if want := writeCase(t, sequentialFormat(f), s, c, recs); !bytes.Equal(got, want) {
			t.Errorf("%d rows: not the sequential writer's bytes", n)
		}
		back, groups := readParquet(t, s, got)
		if want := (n + 249) / 250; groups != want {
			t.Errorf("%d rows: %d row groups, want %d", n, groups, want)
		}
		compareRecords(t, s, back, expectRows(t, s, recs))
		release(back)
		waitGoroutines(t, before)
	}
}

// Buffered counts the row group being built, the one being encoded and
// the encoder's bytes: it stays within about two row groups and the
// encoder's buffers, drops after Flush, and an idle writer whose encode
// is over holds no spool.
func TestPipelineBuffered(t *testing.T) {
	needPipeline(t)
	s, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	d := makeBenchData(60000)
	const limit = 1 << 20
	f, _ := Parquet(s, WithRowGroupBytes(limit))
	var out callerWriter
	w, _ := f.NewParquetWriter(&out)
	var peak, inFlight int64
	for i, l := range d.lines {
		if err := out.call(func() error { return w.Add(l) }); err != nil {
			t.Fatal(err)
		}
		if b := w.Buffered(); b > peak {
			peak = b
		}
		if w.pipe.job != nil {
			inFlight++
			// The batch in flight is counted.
			if w.Buffered() < w.buf.taken {
				t.Fatalf("Buffered %d below the batch in flight %d", w.Buffered(), w.buf.taken)
			}
		}
		if w.buf.rows == 0 && len(w.buf.pending) == 0 && w.buf.building() != 0 {
			t.Fatalf("row %d: a row group just ended, yet %d bytes are counted as being built", i, w.buf.building())
		}
		if w.buf.building() > 2*limit {
			t.Fatalf("row %d: the row group being built holds %d bytes", i, w.buf.building())
		}
	}
	if inFlight == 0 {
		t.Fatal("no row group was ever in flight")
	}
	// Two row groups, plus what pqarrow keeps between row groups and
	// the spool.
	if peak > 3*limit+spoolMax {
		t.Errorf("Buffered peaked at %d bytes, row groups of %d", peak, limit)
	}
	if err := out.call(w.Flush); err != nil {
		t.Fatal(err)
	}
	if w.pipe.job != nil || w.pipe.spool.held.Load() != 0 || w.buf.buffered() != 0 {
		t.Errorf("after Flush: job %v, spool %d bytes, rows %d bytes", w.pipe.job, w.pipe.spool.held.Load(), w.buf.buffered())
	}
	if b := w.Buffered(); b > peak/2 {
		t.Errorf("Buffered %d after Flush, peak %d", b, peak)
	}
	if err := out.call(w.Close); err != nil {
		t.Fatal(err)
	}
}

// A panic of the encoding goroutine comes back as a panic on the caller's
// goroutine (as an inline encode's would), not as a crash of the process.
func TestPipelineEncodePanic(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	recs := genRecords(300, 15)
	f, _ := Parquet(s, WithRowGroupRows(100), WithUnknownFields(DropUnknown))
	var out callerWriter
	w, _ := f.NewParquetWriter(&out)
	w.encoder = func([]arrow.Record) error { panic("boom") }
	got := func() (r any) {
		defer func() { r = recover() }()
		for _, rec := range recs {
			if err := out.call(func() error { return w.Add(rec) }); err != nil {
				t.Fatal(err)
			}
		}
		_ = out.call(w.Flush)
		return nil
	}()
	if got != "boom" {
		t.Fatalf("recovered %v, want the encoder's panic", got)
	}
	if w.pipe.job != nil {
		t.Errorf("the job is still in flight after its panic")
	}
	if err := out.call(func() error { return w.Add(recs[0]) }); err == nil {
		t.Errorf("Add after the encoder's panic: no error")
	}
	if err := out.call(w.Close); err == nil {
		t.Errorf("Close after the encoder's panic: no error")
	}
}

// TestPipelineCallerClaims: a caller that waits for the encode in flight
// (its next row group is full) writes the encoder's chunks to the lent
// file itself, as they fill, and the last one; the file holds the same
// bytes as without a pipeline.
func TestPipelineCallerClaims(t *testing.T) {
	needPipeline(t)
	s := loadSchema(t, "all_types.json")
	recs := genRecords(3000, 15)
	f, err := Parquet(s, WithRowGroupBytes(256<<10), WithUnknownFields(DropUnknown))
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	out := callerWriter{lend: true, gate: gate}
	w, err := f.NewParquetWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	// The encoder's first lent write waits until the caller claims the
	// chunks (it will, at the next full row group): the rest of that
	// encode's chunks are the caller's to write.
	go func() {
		for !w.pipe.spool.claimed.Load() {
			runtime.Gosched()
		}
		close(gate)
	}()
	for i, r := range recs {
		if err := out.call(func() error { return w.Add(r) }); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := out.call(w.Close); err != nil {
		t.Fatal(err)
	}
	if w.pipe.spool.claimedN == 0 {
		t.Error("the waiting caller wrote none of the encoder's chunks")
	}
	if out.stray > 0 || out.lentNow {
		t.Errorf("%d stray writes, lent after Close %v", out.stray, out.lentNow)
	}
	want := writeAll(t, sequentialFormat(f), recs, 0)
	if !bytes.Equal(out.buf.Bytes(), want) {
		t.Fatalf("%d bytes, %d without a pipeline: not the same", out.buf.Len(), len(want))
	}
	t.Logf("%d of %d bytes written by the caller", w.pipe.spool.claimedN, out.buf.Len())
}
