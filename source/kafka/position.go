package kafka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/filesink/filesink/source"
)

// positionVersion is the version of the position document.
const positionVersion = 1

// posDoc is the position document:
//
//	{"v":1,"start":"earliest","bounded":true,
//	 "partitions":[{"topic":"t","partition":0,"next":5,"end":9}, ...]}
//
// next is the offset of the next record to read; end (bounded only) the
// offset to stop at. Partitions are sorted by topic, then partition.
type posDoc struct {
	V          *int      `json:"v"`
	Start      string    `json:"start"`
	Bounded    bool      `json:"bounded"`
	Partitions []posPart `json:"partitions"`
}

type posPart struct {
	Topic     *string `json:"topic"`
	Partition *int32  `json:"partition"`
	Next      *int64  `json:"next"`
	End       *int64  `json:"end,omitempty"`
}

// isNullPosition reports whether pos means "no position": empty, blank or
// the JSON literal null.
func isNullPosition(pos json.RawMessage) bool {
	t := bytes.TrimSpace(pos)
	return len(t) == 0 || string(t) == "null"
}

// decodePosition decodes and checks a position document strictly: unknown
// fields, missing fields, trailing data, negative offsets and duplicate
// partitions are errors matching source.ErrBadPosition. The parts come
// back sorted.
func decodePosition(pos json.RawMessage) (posDoc, []part, error) {
	var d posDoc
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: kafka position %s: %s", source.ErrBadPosition, truncate(pos, 200), fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(pos))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, nil, bad("%v", err)
	}
	if dec.More() {
		return d, nil, bad("trailing data")
	}
	if d.V == nil || *d.V != positionVersion {
		return d, nil, bad(`want "v":%d`, positionVersion)
	}
	if _, err := parseStart(d.Start); err != nil || d.Start == "" {
		return d, nil, bad("start %q: want earliest, latest or an RFC 3339 time", d.Start)
	}
	if len(d.Partitions) == 0 {
		return d, nil, bad("no partitions")
	}
	parts := make([]part, 0, len(d.Partitions))
	for i, pp := range d.Partitions {
		switch {
		case pp.Topic == nil || pp.Partition == nil || pp.Next == nil:
			return d, nil, bad(`partition entry %d: want "topic", "partition" and "next"`, i)
		case !topicRE.MatchString(*pp.Topic):
			return d, nil, bad("partition entry %d: bad topic name %q", i, *pp.Topic)
		case *pp.Partition < 0 || *pp.Next < 0:
			return d, nil, bad("partition entry %d: negative partition or offset", i)
		case d.Bounded && pp.End == nil:
			return d, nil, bad(`partition entry %d: a bounded position needs "end"`, i)
		case !d.Bounded && pp.End != nil:
			return d, nil, bad(`partition entry %d: "end" in an unbounded position`, i)
		case pp.End != nil && *pp.End < 0:
			return d, nil, bad("partition entry %d: negative end", i)
		}
		p := part{topic: *pp.Topic, partition: *pp.Partition, next: *pp.Next, end: -1}
		if pp.End != nil {
			p.end = *pp.End
		}
		parts = append(parts, p)
	}
	slices.SortFunc(parts, cmpPart)
	for i := 1; i < len(parts); i++ {
		if cmpPart(parts[i-1], parts[i]) == 0 {
			return d, nil, bad("partition %s/%d listed twice", parts[i].topic, parts[i].partition)
		}
	}
	return d, parts, nil
}

func cmpPart(a, b part) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition) - int(b.partition)
}

// appendPosition appends the position document of parts (sorted) to b.
func appendPosition(b []byte, start string, bounded bool, parts []*part) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, positionVersion, 10)
	b = append(b, `,"start":`...)
	b = strconv.AppendQuote(b, start)
	b = append(b, `,"bounded":`...)
	b = strconv.AppendBool(b, bounded)
	b = append(b, `,"partitions":[`...)
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"topic":`...)
		b = strconv.AppendQuote(b, p.topic) // topic names are plain ASCII
		b = append(b, `,"partition":`...)
		b = strconv.AppendInt(b, int64(p.partition), 10)
		b = append(b, `,"next":`...)
		b = strconv.AppendInt(b, p.next, 10)
		if bounded {
			b = append(b, `,"end":`...)
			b = strconv.AppendInt(b, p.end, 10)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
