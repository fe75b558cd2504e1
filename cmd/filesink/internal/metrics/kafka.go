package metrics

import (
	"encoding/json"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/kafka"
)

// kafkaSource is a Kafka source whose positions are kept for the
// per-partition metrics. Every other method, CommitToGroup included, is
// the embedded source's.
type kafkaSource struct {
	*kafka.Source
	pos atomic.Pointer[json.RawMessage]
	lag atomic.Pointer[map[string]int64] // kafka.Source.Lag, with pos
}

// Position implements source.Source: the wrapped source's position, also
// kept for the next scrape (the pipeline asks for it after every batch).
func (s *kafkaSource) Position() (json.RawMessage, error) {
	pos, err := s.Source.Position()
	if err == nil {
		lag := s.Source.Lag()
		s.lag.Store(&lag)
		s.pos.Store(&pos)
	}
	return pos, err
}

var _ source.GroupCommitter = (*kafkaSource)(nil)

// WrapKafka returns src with its partitions' offsets exported:
// filesink_kafka_partition_offset (the next offset to read), and in
// bounded mode filesink_kafka_partition_end_offset and
// filesink_kafka_partition_lag_records: offsets left to read, the end
// offset minus the next one in bounded mode, else the partition's last
// stable offset (its high watermark without transactions) in the latest
// fetch minus the next one.
func (m *Metrics) WrapKafka(src *kafka.Source) source.Source {
	ks := &kafkaSource{Source: src}
	if pos, err := src.Position(); err == nil {
		ks.pos.Store(&pos)
	}
	m.mu.Lock()
	m.kafka = append(m.kafka, ks)
	m.mu.Unlock()
	return ks
}

// kafkaCollector exports the positions of the wrapped Kafka sources,
// decoded at scrape time.
type kafkaCollector struct{ m *Metrics }

var (
	labels     = []string{"topic", "partition"}
	offsetDesc = prometheus.NewDesc("filesink_kafka_partition_offset", "Offset of the next record the Kafka source reads from the partition.", labels, nil)
	endDesc    = prometheus.NewDesc("filesink_kafka_partition_end_offset", "Bounded Kafka source: the offset at which the partition's reading stops.", labels, nil)
	lagDesc    = prometheus.NewDesc("filesink_kafka_partition_lag_records", "Kafka source: offsets left to read in the partition (bounded: end offset minus next offset; unbounded: last stable offset of the latest fetch minus next offset).", labels, nil)
)

func (c kafkaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- offsetDesc
	ch <- endDesc
	ch <- lagDesc
}

// position is the part of the Kafka source's position document (see
// kafka.Source.Position) the metrics read.
type position struct {
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Next      int64  `json:"next"`
		End       *int64 `json:"end"`
	} `json:"partitions"`
}

func (c kafkaCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	srcs := append([]*kafkaSource(nil), c.m.kafka...)
	c.m.mu.Unlock()
	for _, s := range srcs {
		raw := s.pos.Load()
		if raw == nil {
			continue
		}
		var p position
		if json.Unmarshal(*raw, &p) != nil {
			continue
		}
		for _, pp := range p.Partitions {
			lv := []string{pp.Topic, strconv.Itoa(int(pp.Partition))}
			ch <- prometheus.MustNewConstMetric(offsetDesc, prometheus.GaugeValue, float64(pp.Next), lv...)
			if pp.End != nil {
				ch <- prometheus.MustNewConstMetric(endDesc, prometheus.GaugeValue, float64(*pp.End), lv...)
				ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(max(*pp.End-pp.Next, 0)), lv...)
			} else if l := s.lag.Load(); l != nil {
				if v, ok := (*l)[pp.Topic+"/"+lv[1]]; ok {
					ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(v), lv...)
				}
			}
		}
	}
}
