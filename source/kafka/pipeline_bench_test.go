package kafka_test

// Kafka-to-file throughput beside its limit, a plain franz-go consume of
// the same topic, measured in the same run against the same kfake broker:
//
//   - BenchmarkKafkaToFile: pipeline.Run with the Kafka source (bounded,
//     read_committed, offsets in the checkpoints) into one file sink subtask
//     (filesink.Writer over committer/localfs, JSON lines, no bucketing,
//     default rolling) in a temp dir, a checkpoint every second (fsyncs,
//     checkpoint record), then the final one: what
//     `filesink run --source kafka://.../bench --bounded --sink DIR
//     --checkpoint-interval 1s` does.
//   - BenchmarkKafkaConsume: a franz-go client consuming the same four
//     partitions directly (read_committed, the same fetch sizes as the
//     source) to the end, touching every value (its first and last byte);
//     nothing written.
//
//   - BenchmarkKafkaConsumeWrite: the plain consume plus what a simple
//     program does to keep the bytes: each value and a newline through one
//     4 MiB bufio.Writer into one file of a temp dir, flush + fsync every
//     second and at the end, then an fsync of the directory. Not the
//     target's limit, but the one the disk sets: Kafka-to-file cannot beat
//     it, and the consume alone (from a broker in memory) may be far above
//     what the disk takes.
//
// All report MB/s of record values; the target is Kafka-to-file >= 70% of
// the plain consume. scripts/bench (part 4) runs them for several rounds.
// The broker is kfakebroker in a process of its own (a Kafka broker is
// remote; FILESINK_KAFKA_BENCH_BROKER=inprocess runs it in the benchmark
// process instead, where the consume reads from memory), so cpu-s/op
// (user+sys of the benchmark process) excludes the broker's work. Nothing
// here asserts a duration.
//
// FILESINK_KAFKA_BENCH_RECORDS sets the number of records (default
// 100,000 of 1 KiB, about 102 MB). TMPDIR selects the filesystem written.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/cputime"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/kafka"
	"github.com/filesink/filesink/vfs"
)

const (
	pbTopic      = "bench"
	pbPartitions = 4
	pbRecordSize = 1024
)

// pbTopicData is the pre-filled topic, shared by the benchmarks of one
// process.
type pbTopicData struct {
	addrs   []string // the broker
	stop    func()   // stops the broker
	records int64
	bytes   int64 // sum of the values' lengths
	err     error
}

var (
	pbOnce sync.Once
	pbData pbTopicData
)

func pbRecords(b *testing.B) int64 {
	if s := os.Getenv("FILESINK_KAFKA_BENCH_RECORDS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("FILESINK_KAFKA_BENCH_RECORDS=%q: want a positive integer", s)
		}
		return n
	}
	return 100_000
}

// pbSetup starts the broker and fills the topic with generated 1 KiB JSON
// lines (source.NewGenerator, round robin over the partitions), once.
func pbSetup(b *testing.B) *pbTopicData {
	n := pbRecords(b)
	pbOnce.Do(func() {
		d := &pbData
		d.addrs, d.stop, d.err = pbStartBroker(kafkatest.Topic{Name: pbTopic, Partitions: pbPartitions})
		if d.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		g, err := source.NewGenerator(source.GenConfig{Count: n, Seed: 1, Size: pbRecordSize, Keys: 1000}, nil)
		if err != nil {
			d.err = err
			return
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.addrs...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(50_000))
		if err != nil {
			d.err = err
			return
		}
		defer cl.Close()
		var (
			mu    sync.Mutex
			first error
		)
		for i := int64(0); ; i++ {
			rec, err := g.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				d.err = err
				return
			}
			d.records++
			d.bytes += int64(len(rec.Value))
			r := &kgo.Record{Topic: pbTopic, Partition: int32(i % pbPartitions), Value: append([]byte(nil), rec.Value...)}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
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
			d.err = err
			return
		}
		d.err = first
	})
	if pbData.err != nil {
		b.Fatal(pbData.err)
	}
	if pbData.records != n {
		b.Fatalf("topic holds %d records, want %d (FILESINK_KAFKA_BENCH_RECORDS changed within one process?)", pbData.records, n)
	}
	runtime.GC()
	return &pbData
}

// pbStartBroker starts the broker the benchmarks read from, with topic. By default
// (FILESINK_KAFKA_BENCH_BROKER=process) it is kfakebroker in a process of
// its own, as a Kafka broker is: the consume then pays for the network and
// the broker's CPU is not the benchmark process's. With "inprocess" the
// broker is a kfake cluster in this process (the consume then reads from
// memory, faster than any disk takes the bytes). The broker lives until
// the process ends (TestMain stops it).
func pbStartBroker(topic kafkatest.Topic) (addrs []string, stop func(), err error) {
	switch mode := os.Getenv("FILESINK_KAFKA_BENCH_BROKER"); mode {
	case "inprocess":
		c, err := kafkatest.NewCluster(kafkatest.Config{Topics: []kafkatest.Topic{topic}})
		if err != nil {
			return nil, nil, err
		}
		return c.Addrs(), c.Close, nil
	case "", "process":
	default:
		return nil, nil, fmt.Errorf("FILESINK_KAFKA_BENCH_BROKER=%q: want process or inprocess", mode)
	}
	dir, err := os.MkdirTemp("", "kfakebroker-bench-")
	if err != nil {
		return nil, nil, err
	}
	bin := filepath.Join(dir, "kfakebroker")
	if out, err := exec.Command("go", "build", "-o", bin, kafkatest.BrokerPackage).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("go build %s: %v\n%s", kafkatest.BrokerPackage, err, out)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-topic", fmt.Sprintf("%s:%d", topic.Name, topic.Partitions))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) == "" {
		stop()
		return nil, nil, fmt.Errorf("kfakebroker printed no address: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	return []string{strings.TrimSpace(line)}, stop, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pbData.stop != nil {
		pbData.stop()
	}
	if avData.stop != nil {
		avData.stop()
	}
	os.Exit(code)
}

func pbCPU(b *testing.B) time.Duration {
	d, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func BenchmarkKafkaToFile(b *testing.B) {
	d := pbSetup(b)
	ctx := context.Background()
	kcfg := kafka.Config{Brokers: d.addrs, Topics: []string{pbTopic}, Bounded: true}
	b.SetBytes(d.bytes)
	b.ReportAllocs()
	var cpu time.Duration
	var ckpts int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		out, err := os.MkdirTemp(b.TempDir(), "out")
		if err != nil {
			b.Fatal(err)
		}
		store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(out, "_filesink"))
		if err != nil {
			b.Fatal(err)
		}
		w, err := filesink.New(localfs.New(vfs.OS{}, out), 0)
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := pbCPU(b)
		b.StartTimer()
		res, err := pipeline.Run(ctx, pipeline.Config{
			OpenSource: func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
				return kafka.Open(ctx, kcfg, pos)
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
		if !res.EndOfInput || res.Records != d.records || res.Bytes != d.bytes {
			b.Fatalf("run %+v: want the end of input after %d records, %d bytes", res, d.records, d.bytes)
		}
		ckpts += int64(res.Checkpoint)
		if i == 0 {
			// Every value and its newline is published; nothing in progress.
			if got, want := pbPublished(b, out), d.bytes+d.records; got != want {
				b.Fatalf("published %d bytes, want %d", got, want)
			}
		}
		if err := os.RemoveAll(out); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(ckpts)/float64(b.N), "ckpts/op")
}

// pbPublished sums the sizes of the visible part files under out; an
// in-progress or pending file fails the benchmark.
func pbPublished(b *testing.B, out string) int64 {
	var n int64
	err := filepath.WalkDir(out, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if e.Name() == "_filesink" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			b.Fatalf("not a finished part: %s", p)
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func BenchmarkKafkaConsume(b *testing.B) { pbConsume(b, false) }

func BenchmarkKafkaConsumeWrite(b *testing.B) { pbConsume(b, true) }

// pbSync flushes w and fsyncs f.
func pbSync(b *testing.B, w *bufio.Writer, f *os.File) {
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

func pbConsume(b *testing.B, write bool) {
	d := pbSetup(b)
	ctx := context.Background()
	at := map[int32]kgo.Offset{}
	for p := range int32(pbPartitions) {
		at[p] = kgo.NewOffset().AtStart()
	}
	b.SetBytes(d.bytes)
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		var (
			f  *os.File
			w  *bufio.Writer
			wd string
		)
		if write {
			b.StopTimer()
			var err error
			if wd, err = os.MkdirTemp(b.TempDir(), "raw"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		cpu0 := pbCPU(b)
		if write {
			var err error
			if f, err = os.Create(filepath.Join(wd, "data.jsonl")); err != nil {
				b.Fatal(err)
			}
			w = bufio.NewWriterSize(f, 4<<20)
		}
		lastSync := time.Now()
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.addrs...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{pbTopic: at}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.FetchMaxBytes(kafka.DefaultFetchMaxBytes), kgo.FetchMaxPartitionBytes(kafka.DefaultFetchMaxPartitionBytes),
			kgo.DisableFetchSessions()) // as the source
		if err != nil {
			b.Fatal(err)
		}
		var recs, bytes int64
		var sum byte
		for recs < d.records {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				b.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				recs++
				bytes += int64(len(r.Value))
				if w != nil {
					_, _ = w.Write(r.Value)
					_ = w.WriteByte('\n')
				} else if len(r.Value) > 0 { // touch the value (a cheap touch: the stricter limit)
					sum ^= r.Value[0] ^ r.Value[len(r.Value)-1]
				}
			})
			if w != nil && time.Since(lastSync) >= time.Second {
				pbSync(b, w, f)
				lastSync = time.Now()
			}
		}
		cl.Close()
		if w != nil {
			pbSync(b, w, f)
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			if err := (vfs.OS{}).SyncDir(wd); err != nil {
				b.Fatal(err)
			}
		}
		cpu += pbCPU(b) - cpu0
		if recs != d.records || bytes != d.bytes {
			b.Fatalf("consumed %d records, %d bytes; want %d, %d", recs, bytes, d.records, d.bytes)
		}
		if sum == 0xff && bytes == 0 {
			b.Log(sum) // keep sum live
		}
		if write {
			b.StopTimer()
			if err := os.RemoveAll(wd); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
