package kafka

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

// BenchmarkKafkaSource reads the same topic (4 partitions, 100-byte
// records, kfake in process) with the source, to io.EOF in bounded mode,
// and with a plain franz-go consumer (direct partitions, read_committed),
// and reports MB/s of each: the second is the limit the first can reach.
func BenchmarkKafkaSource(b *testing.B) {
	const (
		parts   = 4
		perPart = 50_000
		size    = 100
		total   = parts * perPart
	)
	c, err := kafkatest.NewCluster(kafkatest.Config{Topics: []kafkatest.Topic{{Name: "bench", Partitions: parts}}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pcl, err := c.Client(kgo.ProducerLinger(5 * time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	val := bytes.Repeat([]byte("x"), size)
	recs := make([]*kgo.Record, 0, total)
	for p := range int32(parts) {
		for range perPart {
			recs = append(recs, &kgo.Record{Topic: "bench", Partition: p, Value: val})
		}
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	pcl.Close()
	recs = nil

	b.Run("source", func(b *testing.B) {
		b.SetBytes(total * size)
		b.ReportAllocs()
		cfg := Config{Brokers: c.Addrs(), Topics: []string{"bench"}, Bounded: true}
		for b.Loop() {
			s, err := Open(ctx, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for {
				r, err := s.Next(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				n += len(r.Value)
			}
			s.Close()
			if n != total*size {
				b.Fatalf("read %d bytes, want %d", n, total*size)
			}
		}
	})

	b.Run("franz-go", func(b *testing.B) {
		b.SetBytes(total * size)
		b.ReportAllocs()
		at := make(map[int32]kgo.Offset)
		for p := range int32(parts) {
			at[p] = kgo.NewOffset().AtStart()
		}
		for b.Loop() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bench": at}),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.FetchMaxBytes(DefaultFetchMaxBytes), kgo.FetchMaxPartitionBytes(DefaultFetchMaxBytes))
			if err != nil {
				b.Fatal(err)
			}
			n, bytes := 0, 0
			for n < total {
				fs := cl.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) { n++; bytes += len(r.Value) })
			}
			cl.Close()
			if bytes != total*size {
				b.Fatalf("read %d bytes, want %d", bytes, total*size)
			}
		}
	})
}
