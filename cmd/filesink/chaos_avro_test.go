//go:build unix

package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

// Black-box chaos tests of Avro values with a schema change while the job
// runs (docs/testing.md, layer 5): a kfake broker in its own process holds
// a topic of kafkaChaosPartitions partitions of Confluent-framed Avro
// orders (a long id, a timestamp-millis, a decimal(9,2), a nullable
// string), produced in chunks, plain, in committed transactions and in
// aborted ones, whose schemas an in-process srfake registry serves.
// Unbounded `filesink run` processes are killed with SIGKILL at random
// instants while version 1 is produced; then one process runs until it has
// read everything, version 2 (a nullable long qty, a string region with
// the default "eu") is registered and produced while it runs, the process
// changes its columns in place and is killed soon after; more kills follow
// while version 2 and, after the change, version 1 orders of an old
// producer arrive. A last process runs until a checkpoint covers every
// offset and stops on SIGTERM. Then the output must hold every committed
// order once, no aborted one, typed, with the new columns.

const (
	avroChaosTopic = "orders"
	// avroChaosChunk orders go in one transaction or plain batch, spread
	// over the partitions.
	avroChaosChunk = 250
	// Ids [0, avroChaosHalf) are version 1, produced before the change;
	// [avroChaosHalf, avroChaosCount) version 2 and old-producer version 1.
	avroChaosHalf  = 10000
	avroChaosCount = 20000
	// avroChaosKills is the least number of SIGKILLs in each half.
	avroChaosKills = 10
	// avroChaosEpoch is the "at" of order 0 (ms); order n is n ms later.
	avroChaosEpoch = 1767225600000
	// avroChaosAborted is the note of every order of an aborted transaction.
	avroChaosAborted = "aborted"
	avroChanged      = "the records' schema changed"
)

// avroVersion is the schema an order is produced with.
type avroVersion int

const (
	avroV1     avroVersion = iota + 1 // version 1, before the change
	avroV2                            // version 2: qty = id, region = "us"
	avroV1Late                        // version 1 from an old producer, after the change
)

type avroChaosRec struct {
	version   avroVersion
	committed bool
}

// avroChaosInput is what the producer wrote, by order id.
type avroChaosInput struct {
	mu                 sync.Mutex
	recs               map[int64]avroChaosRec
	committed, aborted int
}

// avroProducer writes the orders of the chaos tests.
type avroProducer struct {
	plain, txn *kgo.Client
	reg        *srfake.Registry
	ids        map[string]int // schema text -> registry id
	in         *avroChaosInput
	rng        *rand.Rand
}

func newAvroProducer(t *testing.T, addr string, reg *srfake.Registry, seed uint64) *avroProducer {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}
	plain, err := kgo.NewClient(base...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	txn, err := kgo.NewClient(append(base, kgo.TransactionalID("avro-chaos"), kgo.TransactionTimeout(time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(txn.Close)
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if r := cl.SetCompatibility(t.Context(), sr.SetCompatibility{Level: sr.CompatNone}, avroChaosTopic+"-value"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	return &avroProducer{plain: plain, txn: txn, reg: reg, ids: map[string]int{},
		in: &avroChaosInput{recs: map[int64]avroChaosRec{}}, rng: rand.New(rand.NewPCG(seed, 77))}
}

// register registers schema under the topic's value subject (once).
func (p *avroProducer) register(schema string) (int, error) {
	if id, ok := p.ids[schema]; ok {
		return id, nil
	}
	id, _, err := p.reg.RegisterSchema(avroChaosTopic+"-value", sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		return 0, fmt.Errorf("register the schema: %w", err)
	}
	p.ids[schema] = id
	return id, nil
}

// avroChaosValue is order n of version v in the Confluent wire format.
func avroChaosValue(schema hamba.Schema, id int, n int64, v avroVersion, committed bool) ([]byte, error) {
	m := map[string]any{"id": n, "at": time.UnixMilli(avroChaosEpoch + n).UTC(), "price": big.NewRat(n, 100), "note": nil}
	switch {
	case !committed:
		m["note"] = avroChaosAborted
	case n%4 != 0:
		m["note"] = fmt.Sprintf("n%d", n)
	}
	if v == avroV2 {
		m["qty"], m["region"] = n, "us"
	}
	body, err := hamba.Marshal(schema, m)
	if err != nil {
		return nil, err
	}
	h := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[1:], uint32(id))
	return append(h, body...), nil
}

// chunk produces the orders [from, from+n) of version v round robin to the
// partitions: plain (txn false), or in a transaction committed or aborted.
func (p *avroProducer) chunk(ctx context.Context, from int64, n int, v avroVersion, txn, commit bool) error {
	text := avroOrder
	if v == avroV2 {
		text = avroOrderV2
	}
	id, err := p.register(text)
	if err != nil {
		return err
	}
	schema := hamba.MustParse(text)
	recs := make([]*kgo.Record, n)
	for i := range n {
		val, err := avroChaosValue(schema, id, from+int64(i), v, commit)
		if err != nil {
			return err
		}
		recs[i] = &kgo.Record{Topic: avroChaosTopic, Partition: int32(i % kafkaChaosPartitions), Value: val}
	}
	cl := p.plain
	if txn {
		cl = p.txn
		if err := p.txn.BeginTransaction(); err != nil {
			return err
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	if txn {
		how := kgo.TryCommit
		if !commit {
			how = kgo.TryAbort
		}
		if err := p.txn.EndTransaction(ctx, how); err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
	}
	p.in.mu.Lock()
	defer p.in.mu.Unlock()
	for i := range int64(n) {
		p.in.recs[from+i] = avroChaosRec{version: v, committed: commit}
		if commit {
			p.in.committed++
		} else {
			p.in.aborted++
		}
	}
	return nil
}

// phase produces the orders [from, to) chunk by chunk, 100-300ms apart:
// plain (15%), in a committed transaction (70%) or in an aborted one
// (15%); the first and the last chunk are committed. version picks each
// chunk's version (it may wait).
func (p *avroProducer) phase(ctx context.Context, from, to int64, version func(i int, last bool) (avroVersion, error)) error {
	for i, start := 0, from; start < to; i, start = i+1, start+avroChaosChunk {
		n := int(min(avroChaosChunk, to-start))
		last := start+int64(n) >= to
		v, err := version(i, last)
		if err != nil {
			return err
		}
		kind := p.rng.IntN(100)
		commit := i == 0 || last || kind < 85
		if err := p.chunk(ctx, start, n, v, i == 0 || last || kind >= 15, commit); err != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(100+p.rng.IntN(200)) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// endOffsets returns each partition's high watermark: the offset a
// checkpoint's "next" reaches when the source has read everything.
func (p *avroProducer) endOffsets(t *testing.T) map[int32]int64 {
	t.Helper()
	offs, err := kadm.NewClient(p.plain).ListEndOffsets(t.Context(), avroChaosTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of partition %d: %v", o.Partition, o.Err)
		}
		ends[o.Partition] = o.Offset
	})
	return ends
}

// covers reports whether pos has read every partition up to ends.
func covers(pos *kafkaPos, ends map[int32]int64) bool {
	if pos == nil {
		return false
	}
	for part, end := range ends {
		if pos.next[part] < end {
			return false
		}
	}
	return true
}

// avroProc is one `filesink run` process of the Avro chaos tests.
type avroProc struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan struct{}
	err    error
	start  time.Time
}

func startAvroProc(t *testing.T, bin string, args []string) *avroProc {
	t.Helper()
	p := &avroProc{cmd: exec.Command(bin, args...), done: make(chan struct{}), start: time.Now()}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// stop sends sig and waits for the process to exit; it returns its Wait
// error (nil: exit 0).
func (p *avroProc) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.err
	case <-time.After(time.Minute):
		t.Fatalf("the process did not exit within a minute of %v; stderr:\n%s", sig, lastLines(p.stderr.String(), 20))
		return nil
	}
}

// avroChaos is the run loop of one Avro chaos test.
type avroChaos struct {
	t       *testing.T
	bin     string
	args    []string
	broker  *kafkatest.BrokerProcess
	prod    *avroProducer
	rng     *rand.Rand
	decided func() *kafkaPos // the newest checkpoint's position, nil if none
	check   func(run int)    // the output's invariants, after every run

	runs     int
	kills    [2]int // in each half
	busy     [2]int // of which while orders were being produced
	changes  int    // runs that logged the change
	producer chan error
}

// newAvroChaos starts the broker and the registry and produces the first
// chunk of version 1 (so the subject exists when the first process starts).
func newAvroChaos(t *testing.T, seed uint64) (*avroChaos, *srfake.Registry) {
	t.Helper()
	bin := buildCLI(t)
	broker := kafkatest.StartBroker(t, kafkatest.BuildBroker(t), []kafkatest.Topic{{Name: avroChaosTopic, Partitions: kafkaChaosPartitions}})
	reg := srfake.New()
	t.Cleanup(reg.Close)
	prod := newAvroProducer(t, broker.Addr, reg, seed)
	if err := prod.chunk(t.Context(), 0, avroChaosChunk, avroV1, true, true); err != nil {
		t.Fatal(err)
	}
	return &avroChaos{t: t, bin: bin, broker: broker, prod: prod, rng: rand.New(rand.NewPCG(seed, 33))}, reg
}

// produce starts a producer goroutine for the orders [from, to).
func (c *avroChaos) produce(from, to int64, version func(i int, last bool) (avroVersion, error)) {
	c.producer = make(chan error, 1)
	ctx := c.t.Context()
	go func() { c.producer <- c.prod.phase(ctx, from, to, version) }()
}

// producing reports whether the producer goroutine still runs; one that
// failed fails the test.
func (c *avroChaos) producing() bool {
	select {
	case err := <-c.producer:
		if err != nil {
			c.t.Fatalf("producer: %v", err)
		}
		c.producer = nil
		return false
	default:
		return c.producer != nil
	}
}

// killRun starts a process and kills it with SIGKILL after a random
// 100-1500ms; it must not exit before.
func (c *avroChaos) killRun(half int) {
	t := c.t
	t.Helper()
	c.runs++
	busy := c.producing()
	killAt := time.Duration(100+c.rng.IntN(1400)) * time.Millisecond
	p := startAvroProc(t, c.bin, c.args)
	select {
	case <-p.done:
		t.Fatalf("run %d exited on its own (%v); stderr:\n%s", c.runs, p.err, lastLines(p.stderr.String(), 20))
	case <-time.After(killAt):
	}
	c.killed(p, half, busy)
}

// killed kills p, counts the kill and checks the output.
func (c *avroChaos) killed(p *avroProc, half int, busy bool) {
	t := c.t
	t.Helper()
	if err := p.stop(t, syscall.SIGKILL); err == nil {
		t.Fatalf("run %d exited 0 before its kill; stderr:\n%s", c.runs, lastLines(p.stderr.String(), 20))
	}
	c.kills[half]++
	if busy {
		c.busy[half]++
	}
	if strings.Contains(p.stderr.String(), avroChanged) {
		c.changes++
	}
	done, _ := c.decided().progress()
	t.Logf("run %d: killed after %v (half %d%s); decided %d offsets", c.runs, time.Since(p.start).Round(time.Millisecond),
		half+1, map[bool]string{true: ", producing"}[busy], done)
	c.check(c.runs)
	if t.Failed() {
		t.Fatalf("stderr of run %d:\n%s", c.runs, lastLines(p.stderr.String(), 20))
	}
}

// waitFor polls cond while p runs; p exiting first or two minutes passing
// fails the test.
func (c *avroChaos) waitFor(p *avroProc, what string, cond func() bool) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		c.producing() // a producer that failed fails the test
		select {
		case <-p.done:
			t.Fatalf("run %d exited (%v) before %s; stderr:\n%s", c.runs, p.err, what, lastLines(p.stderr.String(), 20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			done, _ := c.decided().progress()
			t.Fatalf("run %d: no %s within 2 minutes (decided %d offsets; end offsets %v); stderr:\n%s", c.runs, what, done, c.prod.endOffsets(t), lastLines(p.stderr.String(), 20))
		}
	}
}

// decidedAfter returns a condition: a checkpoint newer than prev (a
// process's own) covers ends.
func (c *avroChaos) decidedAfter(prev *kafkaPos, ends map[int32]int64) func() bool {
	return func() bool {
		pos := c.decided()
		return covers(pos, ends) && (prev == nil || pos.id > prev.id)
	}
}

// run is the whole chaos schedule (see the comment at the top).
func (c *avroChaos) run() {
	t := c.t
	t.Logf("filesink %s", strings.Join(c.args, " "))
	start := time.Now()
	c.produce(avroChaosChunk, avroChaosHalf, func(int, bool) (avroVersion, error) { return avroV1, nil })
	for c.kills[0] < avroChaosKills || c.producing() {
		c.killRun(0)
	}

	// The change: a process that has read every version 1 order (a
	// checkpoint of its own covers them: it has its columns) sees version
	// 2 arrive.
	ends := c.prod.endOffsets(t)
	c.runs++
	p := startAvroProc(t, c.bin, c.args)
	c.waitFor(p, "checkpoint covering every version 1 order", c.decidedAfter(c.decided(), ends))
	switched := make(chan struct{})
	ctx := t.Context()
	c.produce(avroChaosHalf, avroChaosCount, func(i int, last bool) (avroVersion, error) {
		if i < 4 {
			return avroV2, nil
		}
		select { // version 1 orders after the change only once it is made
		case <-switched:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if last || c.prod.rng.IntN(4) == 0 {
			return avroV1Late, nil
		}
		return avroV2, nil
	})
	c.waitFor(p, "schema change", func() bool { return strings.Contains(p.stderr.String(), avroChanged) })
	close(switched)
	// Half the time within 50ms of the log line: while the job opens
	// again (an Iceberg table gets its columns).
	wait := 1000
	if c.rng.IntN(2) == 0 {
		wait = 50
	}
	time.Sleep(time.Duration(c.rng.IntN(wait)) * time.Millisecond)
	c.killed(p, 1, true)
	for c.kills[1] < avroChaosKills || c.producing() {
		c.killRun(1)
	}
	c.finish()
	t.Logf("%d runs in %v: %d kills while version 1 was produced or read (%d during production), %d after the change (%d during production); %d run(s) logged the change",
		c.runs, time.Since(start).Round(time.Millisecond), c.kills[0], c.busy[0], c.kills[1], c.busy[1], c.changes)
	if c.busy[0] < 3 || c.busy[1] < 3 {
		t.Errorf("%d and %d kills while orders were produced, want at least 3 in each half", c.busy[0], c.busy[1])
	}
	if c.changes != 1 {
		t.Errorf("%d runs logged %q, want the one that saw version 2 arrive", c.changes, avroChanged)
	}
}

// finish runs a last process until a checkpoint covers every offset, then
// stops it with SIGTERM: it must exit 0.
func (c *avroChaos) finish() {
	t := c.t
	ends := c.prod.endOffsets(t)
	c.runs++
	p := startAvroProc(t, c.bin, c.args)
	c.waitFor(p, "checkpoint covering every offset", c.decidedAfter(c.decided(), ends))
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("run %d after SIGTERM: %v; stderr:\n%s", c.runs, err, lastLines(p.stderr.String(), 20))
	}
	if strings.Contains(p.stderr.String(), avroChanged) {
		c.changes++
	}
	t.Logf("run %d: stopped by SIGTERM after %v, exit 0", c.runs, time.Since(p.start).Round(time.Millisecond))
	c.check(c.runs)
}

// avroChaosRow is an order read back from the output.
type avroChaosRow struct {
	id           int64
	qty          *int64
	region, note *string
}

// parseAvroChaosRow reads an order from a JSON object whose integers are
// numbers (Parquet via pqarrow) or strings (the Iceberg reader).
func parseAvroChaosRow(raw string) (avroChaosRow, error) {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return avroChaosRow{}, err
	}
	num := func(k string) (*int64, error) {
		var s string
		switch v := m[k].(type) {
		case nil:
			return nil, nil
		case json.Number:
			s = v.String()
		case string:
			s = v
		default:
			return nil, fmt.Errorf("%s is %T", k, v)
		}
		var n int64
		_, err := fmt.Sscan(s, &n)
		return &n, err
	}
	str := func(k string) *string {
		if s, ok := m[k].(string); ok {
			return &s
		}
		return nil
	}
	id, err := num("id")
	if err == nil && id == nil {
		err = errors.New("no id")
	}
	if err != nil {
		return avroChaosRow{}, fmt.Errorf("%.200s: %v", raw, err)
	}
	qty, err := num("qty")
	return avroChaosRow{id: *id, qty: qty, region: str("region"), note: str("note")}, err
}

// checkAvroChaosRows checks the output's orders against the input: every
// committed order once, no aborted one, the new columns as each order's
// version makes them (a version 1 order before the change was written
// without them or with the default region, as the process that read it
// had its columns).
func checkAvroChaosRows(t *testing.T, rows []avroChaosRow, in *avroChaosInput) {
	t.Helper()
	seen := map[int64]int{}
	bad := 0
	for _, r := range rows {
		seen[r.id]++
		rec, ok := in.recs[r.id]
		var want string
		switch {
		case !ok:
			want = "an order of the input"
		case !rec.committed:
			want = "no aborted order"
		case rec.version == avroV2 && (r.qty == nil || *r.qty != r.id || r.region == nil || *r.region != "us"):
			want = "qty = id, region us"
		case rec.version == avroV1Late && (r.qty != nil || r.region == nil || *r.region != "eu"):
			want = "qty null, region eu (the default)"
		case rec.version == avroV1 && (r.qty != nil || r.region != nil && *r.region != "eu"):
			want = "qty null, region null or eu"
		case (r.note == nil) != (r.id%4 == 0) || r.note != nil && *r.note != fmt.Sprintf("n%d", r.id):
			want = "its note"
		default:
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("order %d (%+v) in the output: want %s", r.id, rec, want)
		}
	}
	missing, twice := 0, 0
	for id, rec := range in.recs {
		switch n := seen[id]; {
		case rec.committed && n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	if missing+twice+bad > 0 || len(rows) != in.committed {
		t.Errorf("%d orders in the output for %d committed (%d aborted): %d missing, %d more than once, %d wrong", len(rows), in.committed, in.aborted, missing, twice, bad)
	}
}

// TestChaosKill9AvroS3Parquet: Avro orders with aborted transactions and a
// schema change half-way, to Parquet on MinIO, killed at random (see the
// comment at the top). After every kill the published objects are
// checked (none changes or disappears, no order twice, no aborted one);
// at the end every committed order is there once, and DuckDB reads the
// columns typed: at TIMESTAMP WITH TIME ZONE, price DECIMAL(9,2), qty
// BIGINT, region VARCHAR.
func TestChaosKill9AvroS3Parquet(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	query := duckDB(t)
	c, reg := newAvroChaos(t, chaosSeed(t))
	s3c := newS3Chaos(t, c.bin, srv, chaosConfig{name: "avro"}, nil)
	c.args = append([]string{"run", "--source", "kafka://" + c.broker.Addr + "/" + avroChaosTopic, "--value-format", "avro",
		"--schema-registry", reg.URL(), "--sink", s3c.sink, "--format", "parquet", "--checkpoint-interval", "300ms",
		"--progress", "off"}, s3c.flags...)
	c.decided = func() *kafkaPos {
		ids, err := s3c.store.List(t.Context())
		if err != nil || len(ids) == 0 {
			return nil
		}
		ck, err := s3c.store.Get(t.Context(), ids[len(ids)-1])
		if err != nil {
			t.Fatalf("newest checkpoint record: %v", err)
		}
		return kafkaPosOf(t, ck)
	}
	out := &avroParquetOut{s3c: s3c, etags: map[string]string{}, owner: map[int64]string{}}
	c.check = out.check
	c.run()

	var rows []avroChaosRow
	for _, r := range out.rows {
		rows = append(rows, r...)
	}
	checkAvroChaosRows(t, rows, c.prod.in)
	checkAvroChaosParquet(t, query, s3c.mirror, c.prod.in)
	if vout, err := s3c.cli("verify", "--deep", "--sink", s3c.sink); err != nil {
		t.Errorf("filesink verify --deep: %v\n%s", err, lastLines(vout, 20))
	}
}

// avroParquetOut follows the Parquet objects of the S3 sink.
type avroParquetOut struct {
	s3c   *s3Chaos
	etags map[string]string         // published object -> its ETag
	rows  map[string][]avroChaosRow // published object -> its orders
	owner map[int64]string          // order id -> the object it is in
}

// check mirrors the objects published since the last call: a published
// object never changes or disappears, holds complete Parquet, and no order
// is in two places or of an aborted transaction.
func (o *avroParquetOut) check(run int) {
	t := o.s3c.t
	t.Helper()
	if o.rows == nil {
		o.rows = map[string][]avroChaosRow{}
	}
	finished, _ := o.s3c.list()
	for rel, etag := range o.etags {
		if f, ok := finished[rel]; !ok || f.etag != etag {
			t.Errorf("after run %d: published object %s changed or disappeared", run, rel)
		}
	}
	for rel, f := range finished {
		if _, ok := o.etags[rel]; ok {
			continue
		}
		o.etags[rel] = f.etag
		b, _ := o.s3c.get(rel)
		local := filepath.Join(o.s3c.mirror, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, b, 0o644); err != nil {
			t.Fatal(err)
		}
		lines, err := bulkLines(local)
		if err != nil {
			t.Errorf("after run %d: %v", run, err)
			continue
		}
		for _, l := range lines {
			r, err := parseAvroChaosRow(l)
			switch {
			case err != nil:
				t.Errorf("after run %d: %s: %v", run, rel, err)
				continue
			case r.note != nil && *r.note == avroChaosAborted:
				t.Errorf("after run %d: order %d of an aborted transaction is in %s", run, r.id, rel)
			case o.owner[r.id] != "":
				t.Errorf("after run %d: order %d is in %s and %s", run, r.id, o.owner[r.id], rel)
			}
			o.owner[r.id] = rel
			o.rows[rel] = append(o.rows[rel], r)
		}
	}
}

// checkAvroChaosParquet reads the mirrored objects with DuckDB: the count,
// the distinct ids, the types of the columns, the values of at and price,
// and the new columns by version.
func checkAvroChaosParquet(t *testing.T, query func(string) (map[string]string, error), dir string, in *avroChaosInput) {
	t.Helper()
	v2, late := 0, 0
	for _, r := range in.recs {
		switch {
		case !r.committed:
		case r.version == avroV2:
			v2++
		case r.version == avroV1Late:
			late++
		}
	}
	got, err := query(fmt.Sprintf(`SELECT count(*) AS n, count(DISTINCT id) AS ids,
		typeof(any_value("at")) AS at_type, typeof(any_value(price)) AS price_type,
		typeof(any_value(qty)) AS qty_type, typeof(any_value(region)) AS region_type,
		count(*) FILTER (WHERE note = '%s') AS aborted,
		count(*) FILTER (WHERE price * 100 <> id OR epoch_ms("at") <> %d + id) AS bad_values,
		count(*) FILTER (WHERE qty = id AND region = 'us') AS v2,
		count(*) FILTER (WHERE id >= %d AND qty IS NULL AND region = 'eu') AS late
		FROM read_parquet('%s/**/*.parquet', union_by_name=true)`, avroChaosAborted, avroChaosEpoch, avroChaosHalf, dir))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"n": fmt.Sprint(in.committed), "ids": fmt.Sprint(in.committed),
		"at_type": "TIMESTAMP WITH TIME ZONE", "price_type": "DECIMAL(9,2)", "qty_type": "BIGINT", "region_type": "VARCHAR",
		"aborted": "0", "bad_values": "0", "v2": fmt.Sprint(v2), "late": fmt.Sprint(late)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DuckDB reads %v,\nwant %v", got, want)
	}
	t.Logf("DuckDB: %v", got)
}

// TestChaosKill9AvroIceberg: the same orders into an Iceberg table (a
// local warehouse, the embedded SQLite catalog). At the end the
// independent reader must find every committed order once and no aborted
// one, each lane checkpoint in one snapshot, no data file that no
// snapshot references, and the table's schema must have the new columns:
// qty long and region string, optional.
func TestChaosKill9AvroIceberg(t *testing.T) {
	c, reg := newAvroChaos(t, chaosSeed(t))
	wh := filepath.Join(t.TempDir(), "lake")
	tableDir := filepath.Join(wh, "shop.db", avroChaosTopic)
	stateDir := filepath.Join(tableDir, "_filesink")
	c.args = []string{"run", "--source", "kafka://" + c.broker.Addr + "/" + avroChaosTopic, "--value-format", "avro",
		"--schema-registry", reg.URL(), "--sink", "iceberg://shop." + avroChaosTopic, "--warehouse", wh,
		"--checkpoint-interval", "300ms", "--progress", "off"}
	c.decided = func() *kafkaPos { newest, _ := kafkaDecided(t, stateDir); return newest }
	out := &avroIcebergOut{t: t, catalog: filepath.Join(wh, "catalog.db"), seen: map[int64]bool{}}
	c.check = out.check
	c.run()

	loc := strings.TrimPrefix(icebergSQLite(filepath.Join(wh, "catalog.db")).metadataLocation(t, "shop", avroChaosTopic), "file://")
	tbl := icebergtest.MustRead(t, loc, icebergtest.WithColumns("id", "qty", "region", "note"))
	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 {
		t.Fatalf("the reader found %v, paths twice: %v", tbl.Errors, tbl.DuplicatePaths)
	}
	var rows []avroChaosRow
	for _, raw := range tbl.Data {
		r, err := parseAvroChaosRow(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	checkAvroChaosRows(t, rows, c.prod.in)
	if int(tbl.Rows) != c.prod.in.committed {
		t.Errorf("the reader counts %d rows, want %d", tbl.Rows, c.prod.in.committed)
	}
	checkIcebergOnce(t, tbl, localManifests(t, filepath.Join(stateDir, "manifests")))
	checkNoOrphans(t, tbl, localDataFiles(t, tableDir))
	checkAvroChaosSchema(t, loc)
}

// avroIcebergOut follows the table of the Iceberg test.
type avroIcebergOut struct {
	t       *testing.T
	catalog string         // the embedded catalog's database
	seen    map[int64]bool // the orders in the table after an earlier run
}

// check reads the table the catalog points at, if there is one yet, with
// the independent reader: nothing wrong, no order twice, none of an
// aborted transaction, and every order an earlier run left there still
// there.
func (o *avroIcebergOut) check(run int) {
	t := o.t
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+o.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var loc string
	q := "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'shop' AND table_name = ?"
	if db.QueryRow(q, avroChaosTopic).Scan(&loc) != nil {
		return // no catalog or no table yet
	}
	tbl := icebergtest.MustRead(t, strings.TrimPrefix(loc, "file://"), icebergtest.WithColumns("id", "note"))
	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 {
		t.Errorf("after run %d: the reader found %v, paths twice: %v", run, tbl.Errors, tbl.DuplicatePaths)
	}
	now := map[int64]bool{}
	for _, raw := range tbl.Data {
		r, err := parseAvroChaosRow(string(raw))
		switch {
		case err != nil:
			t.Errorf("after run %d: %v", run, err)
		case now[r.id]:
			t.Errorf("after run %d: order %d is in the table twice", run, r.id)
		case r.note != nil && *r.note == avroChaosAborted:
			t.Errorf("after run %d: order %d of an aborted transaction is in the table", run, r.id)
		}
		now[r.id] = true
	}
	gone := 0
	for id := range o.seen {
		if !now[id] {
			gone++
		}
	}
	if gone > 0 {
		t.Errorf("after run %d: %d orders an earlier run left in the table are gone", run, gone)
	}
	o.seen = now
}

// checkAvroChaosSchema reads the current schema of the table metadata at
// loc: the columns of both versions, typed, the new ones optional.
func checkAvroChaosSchema(t *testing.T, loc string) {
	t.Helper()
	checkIcebergTypes(t, loc, map[string]string{"id": "long", "at": "timestamptz", "price": "decimal(9, 2)",
		"note": "string?", "qty": "long?", "region": "string?"})
}
