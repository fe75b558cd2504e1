package kafka_test

// Kafka Avro -> Parquet beside its limit, the two libraries it is built
// on used alone on the same records, in the same run:
//
//   - BenchmarkAvroKafkaToParquet: what `filesink run --source
//     kafka://.../avro --bounded --value-format avro --schema-registry URL
//     --format parquet --sink DIR --checkpoint-interval 1s` does:
//     pipeline.Run with the Kafka source (bounded, read_committed) wrapped
//     by source.Decoded with the avro package's decoder (schemas from an
//     srfake registry in this process), into one file sink subtask with
//     the Parquet bulk format at the CLI's defaults (snappy, dictionary
//     auto, the schema document made by avro.SchemaDoc from the subject's
//     newest schema) over committer/localfs, a checkpoint every second
//     (fsyncs, the parts rolled and committed), then the final one.
//   - BenchmarkAvroDecode: hamba/avro decoding the same record bodies alone,
//     from memory. json is the product's decoding (avro.AppendJSON: hamba's
//     Reader driven by the schema, appending the JSON the sink takes);
//     struct is hamba.Unmarshal into a Go struct (hamba's fastest path, no
//     JSON: a reference); map is hamba.Unmarshal into a map[string]any, and
//     map-json that plus encoding/json.Marshal of the map: the generic
//     alternative to AppendJSON.
//   - BenchmarkAvroParquetEncode: the Parquet bulk format alone (same schema
//     and options as the sink) on the JSON records AppendJSON made of the
//     same bodies, into one file in memory.
//
// All report records/s, and MB/s of the framed Avro values (the same bytes
// in each, whatever they process), and cpu-s/op of the process. The limit
// of the sink is decoding then encoding each record: 1/(1/decode +
// 1/encode) records/s with decode the json case; the target is the sink
// at >= 80% of it. scripts/bench (part 8) runs them for several rounds.
// The broker is kfakebroker in a process of its own, as for
// BenchmarkKafkaToFile (FILESINK_KAFKA_BENCH_BROKER=inprocess: in this
// process). Nothing here asserts a duration.
//
// FILESINK_AVRO_BENCH_RECORDS sets the number of records (default 200,000
// orders of 11 fields, about 180 bytes of Avro and 345 of JSON each).
// TMPDIR selects the filesystem written.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/avro"
	"github.com/filesink/filesink/source/kafka"
	"github.com/filesink/filesink/vfs"
)

const (
	avTopic      = "avro"
	avPartitions = 4
	avSubject    = avTopic + "-value"
)

// avSchema is an order event: the usual mix of a Kafka Avro topic.
const avSchema = `{"type": "record", "name": "Order", "namespace": "bench", "fields": [
	{"name": "id", "type": "long"},
	{"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "customer", "type": "string"},
	{"name": "email", "type": "string"},
	{"name": "address", "type": "string"},
	{"name": "country", "type": "string"},
	{"name": "amount", "type": "double"},
	{"name": "note", "type": ["null", "string"], "default": null},
	{"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]}},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
	{"name": "item_ids", "type": {"type": "array", "items": "long"}}
]}`

// avOrder is a record of avSchema as a Go struct (hamba's codec).
type avOrder struct {
	ID        int64     `avro:"id"`
	CreatedAt time.Time `avro:"created_at"`
	Customer  string    `avro:"customer"`
	Email     string    `avro:"email"`
	Address   string    `avro:"address"`
	Country   string    `avro:"country"`
	Amount    float64   `avro:"amount"`
	Note      *string   `avro:"note"`
	Status    string    `avro:"status"`
	Price     *big.Rat  `avro:"price"`
	ItemIDs   []int64   `avro:"item_ids"`
}

// avRecords is the data set: the Avro bodies (without the 5-byte header)
// and, made from them by AppendJSON, the JSON records, each concatenated
// with its end offsets.
type avRecords struct {
	schema hamba.Schema
	id     int // the schema id in the wire format (the registry's, or 1)
	bodies []byte
	bEnds  []int
	json   []byte
	jEnds  []int
	framed int64 // sum of the framed values' lengths
}

func (r *avRecords) n() int { return len(r.bEnds) }

func (r *avRecords) body(i int) []byte {
	start := 0
	if i > 0 {
		start = r.bEnds[i-1]
	}
	return r.bodies[start:r.bEnds[i]]
}

func (r *avRecords) jsonRecord(i int) []byte {
	start := 0
	if i > 0 {
		start = r.jEnds[i-1]
	}
	return r.json[start:r.jEnds[i]]
}

func avCount(b *testing.B) int {
	if s := os.Getenv("FILESINK_AVRO_BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("FILESINK_AVRO_BENCH_RECORDS=%q: want a positive integer", s)
		}
		return n
	}
	return 200_000
}

var (
	avFirst = []string{"Ada", "Grace", "Linus", "Margaret", "Dennis", "Barbara", "Ken", "Frances", "Edsger", "Radia"}
	avLast  = []string{"Lovelace", "Hopper", "Torvalds", "Hamilton", "Ritchie", "Liskov", "Thompson", "Allen", "Dijkstra", "Perlman"}
	avCity  = []string{"Lisbon", "Nairobi", "Osaka", "Valparaíso", "Tromsø", "Winnipeg", "Adelaide", "Kraków"}
	avLand  = []string{"PT", "KE", "JP", "CL", "NO", "CA", "AU", "PL"}
	avWords = strings.Fields("please leave the parcel at the back door ring twice gift wrap no invoice in the box call on arrival fragile")
	avState = []string{"NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"}
)

// avOrderAt returns the i-th generated order (seeded: the same data set in
// every process).
func avOrderAt(rng *rand.Rand, i int) avOrder {
	first, last := avFirst[rng.IntN(len(avFirst))], avLast[rng.IntN(len(avLast))]
	c := rng.IntN(len(avCity))
	o := avOrder{
		ID:        int64(i) + 1_000_000,
		CreatedAt: time.UnixMilli(1_767_225_600_000 + int64(i)*37 + rng.Int64N(1000)).UTC(),
		Customer:  first + " " + last,
		Email:     fmt.Sprintf("%s.%s%d@example.com", strings.ToLower(first), strings.ToLower(last), rng.IntN(10000)),
		Address:   fmt.Sprintf("%d %s Street, apartment %d, %05d %s", 1+rng.IntN(999), last, 1+rng.IntN(99), rng.IntN(100000), avCity[c]),
		Country:   avLand[c],
		Amount:    float64(rng.IntN(1_000_000)) / 100,
		Status:    avState[rng.IntN(len(avState))],
		Price:     big.NewRat(rng.Int64N(10_000_000), 100),
	}
	if rng.IntN(2) == 0 {
		var sb strings.Builder
		for sb.Len() < 40+rng.IntN(80) {
			if sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(avWords[rng.IntN(len(avWords))])
		}
		note := sb.String()
		o.Note = &note
	}
	o.ItemIDs = make([]int64, 1+rng.IntN(5))
	for k := range o.ItemIDs {
		o.ItemIDs[k] = rng.Int64N(1 << 40)
	}
	return o
}

// avMake generates n orders as Avro bodies and their JSON (AppendJSON).
func avMake(n, id int) (*avRecords, error) {
	s, err := hamba.Parse(avSchema)
	if err != nil {
		return nil, err
	}
	r := &avRecords{schema: s, id: id, bEnds: make([]int, 0, n), jEnds: make([]int, 0, n)}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		body, err := hamba.Marshal(s, avOrderAt(rng, i))
		if err != nil {
			return nil, err
		}
		r.bodies = append(r.bodies, body...)
		r.bEnds = append(r.bEnds, len(r.bodies))
		r.framed += 5 + int64(len(body))
		if r.json, err = avro.AppendJSON(r.json, s, body); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		r.jEnds = append(r.jEnds, len(r.json))
	}
	return r, nil
}

// avMemOnce is the data set of the benchmarks that need no broker.
var (
	avMemOnce sync.Once
	avMem     *avRecords
	avMemErr  error
)

func avMemRecords(b *testing.B) *avRecords {
	n := avCount(b)
	avMemOnce.Do(func() { avMem, avMemErr = avMake(n, 1) })
	if avMemErr != nil {
		b.Fatal(avMemErr)
	}
	if avMem.n() != n {
		b.Fatalf("%d records made, want %d (FILESINK_AVRO_BENCH_RECORDS changed within one process?)", avMem.n(), n)
	}
	runtime.GC()
	return avMem
}

// avTopicData is the broker with the topic of framed values, and the
// registry that has their schema.
type avTopicData struct {
	addrs    []string
	stop     func()
	registry string // srfake's URL
	records  int64
	framed   int64
	err      error
}

var (
	avOnce sync.Once
	avData avTopicData
)

// avSetup starts the registry and the broker and fills the topic, once.
func avSetup(b *testing.B) *avTopicData {
	n := avCount(b)
	avOnce.Do(func() {
		d := &avData
		fake := srfake.New() // lives until the process ends
		d.registry = fake.URL()
		id, _, err := fake.RegisterSchema(avSubject, sr.Schema{Schema: avSchema, Type: sr.TypeAvro})
		if err != nil {
			d.err = err
			return
		}
		recs, err := avMake(n, id)
		if err != nil {
			d.err = err
			return
		}
		d.records, d.framed = int64(recs.n()), recs.framed
		if d.addrs, d.stop, d.err = pbStartBroker(kafkatest.Topic{Name: avTopic, Partitions: avPartitions}); d.err != nil {
			return
		}
		d.err = avProduce(d.addrs, recs)
	})
	if avData.err != nil {
		b.Fatal(avData.err)
	}
	if avData.records != int64(n) {
		b.Fatalf("topic holds %d records, want %d (FILESINK_AVRO_BENCH_RECORDS changed within one process?)", avData.records, n)
	}
	runtime.GC()
	return &avData
}

// avProduce writes recs in the Confluent wire format, round robin over
// the partitions.
func avProduce(addrs []string, recs *avRecords) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(50_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		mu    sync.Mutex
		first error
	)
	for i := range recs.n() {
		body := recs.body(i)
		v := make([]byte, 5, 5+len(body))
		binary.BigEndian.PutUint32(v[1:], uint32(recs.id))
		v = append(v, body...)
		cl.Produce(ctx, &kgo.Record{Topic: avTopic, Partition: int32(i % avPartitions), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return first
}

// avFormat is the Parquet bulk format of the records, as the CLI makes it
// from the registry with its default flags.
func avFormat(b *testing.B, s hamba.Schema) filesink.BulkFormat {
	doc, err := avro.SchemaDoc(s, "")
	if err != nil {
		b.Fatal(err)
	}
	bs, err := bulk.ParseSchema(doc)
	if err != nil {
		b.Fatal(err)
	}
	f, err := bulk.NewFormat("parquet", bs, bulk.WithDictionary(bulk.DictAuto), bulk.WithUnknownFields(bulk.RejectUnknown),
		bulk.WithCompression(bulk.Snappy), bulk.WithPageBytes(bulk.DefaultPageBytes), bulk.WithRowGroupBytes(bulk.DefaultRowGroupBytes))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// avReport reports the records/s over the timed wall time and the CPU
// time per op.
func avReport(b *testing.B, n int, cpu time.Duration) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

func BenchmarkAvroKafkaToParquet(b *testing.B) {
	d := avSetup(b)
	ctx := context.Background()
	kcfg := kafka.Config{Brokers: d.addrs, Topics: []string{avTopic}, Bounded: true}
	b.SetBytes(d.framed)
	b.ReportAllocs()
	var cpu time.Duration
	var ckpts int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		out, err := os.MkdirTemp(b.TempDir(), "out")
		if err != nil {
			b.Fatal(err)
		}
		store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(out, "_filesink"))
		if err != nil {
			b.Fatal(err)
		}
		// As the CLI: a registry client per run, the columns from the
		// subject's newest schema.
		reg, err := avro.NewRegistry([]string{d.registry})
		if err != nil {
			b.Fatal(err)
		}
		s, _, err := reg.Latest(ctx, avSubject)
		if err != nil {
			b.Fatal(err)
		}
		w, err := filesink.New(localfs.New(vfs.OS{}, out), 0, filesink.WithBulkFormat(avFormat(b, s)))
		if err != nil {
			b.Fatal(err)
		}
		dec := avro.NewDecoder(reg).Values()
		cpu0 := pbCPU(b)
		b.StartTimer()
		res, err := pipeline.Run(ctx, pipeline.Config{
			OpenSource: func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
				src, err := kafka.Open(ctx, kcfg, pos)
				if err != nil {
					return nil, err
				}
				return source.Decoded(src, dec, nil), nil
			},
			Store:              store,
			Sinks:              []pipeline.Sink{w},
			CheckpointInterval: time.Second,
		})
		b.StopTimer()
		cpu += pbCPU(b) - cpu0
		if err != nil {
			b.Fatal(err)
		}
		if !res.EndOfInput || res.Records != d.records || w.Stats().Records.Load() != d.records {
			b.Fatalf("run %+v, %d records written: want the end of input after %d records", res, w.Stats().Records.Load(), d.records)
		}
		ckpts += int64(res.Checkpoint)
		if pbPublished(b, out) == 0 { // and no part left unfinished
			b.Fatal("no Parquet part published")
		}
		if err := os.RemoveAll(out); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	avReport(b, int(d.records), cpu)
	b.ReportMetric(float64(ckpts)/float64(b.N), "ckpts/op")
}

func BenchmarkAvroDecode(b *testing.B) {
	r := avMemRecords(b)
	b.Run("json", func(b *testing.B) {
		var dst []byte
		var w avro.JSONWriter
		avDecodeLoop(b, r, func(body []byte) error {
			var err error
			dst, err = w.Append(dst[:0], r.schema, body)
			return err
		})
	})
	b.Run("struct", func(b *testing.B) {
		avDecodeLoop(b, r, func(body []byte) error {
			var o avOrder
			return hamba.Unmarshal(r.schema, body, &o)
		})
	})
	b.Run("map", func(b *testing.B) {
		avDecodeLoop(b, r, func(body []byte) error {
			var m map[string]any
			return hamba.Unmarshal(r.schema, body, &m)
		})
	})
	b.Run("map-json", func(b *testing.B) {
		avDecodeLoop(b, r, func(body []byte) error {
			var m map[string]any
			if err := hamba.Unmarshal(r.schema, body, &m); err != nil {
				return err
			}
			_, err := json.Marshal(m)
			return err
		})
	})
}

// avDecodeLoop runs decode on every body of r once per op.
func avDecodeLoop(b *testing.B, r *avRecords, decode func([]byte) error) {
	b.SetBytes(r.framed)
	b.ReportAllocs()
	cpu0 := pbCPU(b)
	b.ResetTimer()
	for range b.N {
		for i := range r.n() {
			if err := decode(r.body(i)); err != nil {
				b.Fatalf("record %d: %v", i, err)
			}
		}
	}
	b.StopTimer()
	avReport(b, r.n(), pbCPU(b)-cpu0)
}

func BenchmarkAvroParquetEncode(b *testing.B) {
	r := avMemRecords(b)
	f := avFormat(b, r.schema)
	var buf bytes.Buffer
	b.SetBytes(r.framed)
	b.ReportAllocs()
	var size int
	cpu0 := pbCPU(b)
	b.ResetTimer()
	for range b.N {
		buf.Reset()
		w, err := f.NewWriter(&buf)
		if err != nil {
			b.Fatal(err)
		}
		for i := range r.n() {
			if err := w.Add(r.jsonRecord(i)); err != nil {
				b.Fatalf("record %d: %v", i, err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.StopTimer()
	avReport(b, r.n(), pbCPU(b)-cpu0)
	b.ReportMetric(float64(size), "parquet-bytes")
	b.ReportMetric(float64(len(r.json))/float64(r.n()), "json-bytes/record")
}
