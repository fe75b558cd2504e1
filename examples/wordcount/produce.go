package main

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce writes each line of r (without its newline) to topic as one
// record, spread over the topic's partitions, and waits until every record
// is acknowledged. It returns the number of lines written.
func Produce(ctx context.Context, brokers []string, topic string, r io.Reader) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var (
		n     int64
		first error
		errs  = make(chan error, 1)
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		cl.Produce(ctx, &kgo.Record{Value: append([]byte(nil), sc.Bytes()...)}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
		n++
	}
	if err := sc.Err(); err != nil {
		first = fmt.Errorf("read lines: %w", err)
	}
	if err := cl.Flush(ctx); err != nil && first == nil {
		first = err
	}
	select {
	case err := <-errs:
		if first == nil {
			first = fmt.Errorf("produce to %s: %w", topic, err)
		}
	default:
	}
	return n, first
}
