package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/source"
)

func TestReadAllPartitions(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 3})
	want := produceN(t, c, "t", 3, 20)
	cfg := testConfig(c, "t")
	cfg.Bounded = true
	s := mustOpen(t, cfg, nil)
	got := readToEOF(t, s)
	sameRecords(t, got, want)
	if got := s.Describe(); !strings.Contains(got, "kafka t on "+c.Bootstrap()) || !strings.Contains(got, "3 partitions") {
		t.Errorf("Describe = %q", got)
	}
	var doc posDoc
	if err := json.Unmarshal(position(t, s), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Partitions) != 3 || !doc.Bounded || doc.Start != "earliest" {
		t.Fatalf("position %+v", doc)
	}
	for _, p := range doc.Partitions {
		if *p.Next != 20 || *p.End != 20 {
			t.Errorf("position of %s/%d: next %d end %d, want 20 20", *p.Topic, *p.Partition, *p.Next, *p.End)
		}
	}
}

func TestOriginAndValue(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "orders.v1", Partitions: 2})
	c.MustProduce(t, "orders.v1", 1, "a", "b")
	cfg := testConfig(c, "orders.v1")
	cfg.Bounded = true
	got := readToEOF(t, mustOpen(t, cfg, nil))
	want := []rec{{"orders.v1/1:0", "a"}, {"orders.v1/1:1", "b"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestSubsetOfPartitionsAndTopics(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "a", Partitions: 4}, kafkatest.Topic{Name: "b", Partitions: 4})
	all := append(produceN(t, c, "a", 4, 5), produceN(t, c, "b", 4, 5)...)
	cfg := testConfig(c, "b", "a")
	cfg.Bounded = true
	cfg.Partitions = []int32{2, 0}
	var want []rec
	for _, r := range all {
		if strings.Contains(r.Origin, "/0:") || strings.Contains(r.Origin, "/2:") {
			want = append(want, r)
		}
	}
	sameRecords(t, readToEOF(t, mustOpen(t, cfg, nil)), want)
}

// TestResumeExactly stops after k records for every k, resumes from the
// position and checks that the two runs together return every record
// exactly once.
func TestResumeExactly(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		t.Run(map[bool]string{true: "bounded", false: "unbounded"}[bounded], func(t *testing.T) {
			c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 3})
			want := produceN(t, c, "t", 3, 7)
			cfg := testConfig(c, "t")
			cfg.Bounded = bounded
			for _, k := range []int{0, 1, 2, 10, 20, 21} {
				s := mustOpen(t, cfg, nil)
				first := readN(t, s, k)
				pos := position(t, s)
				s.Close()
				if _, err := s.Next(context.Background()); !errors.Is(err, source.ErrClosed) {
					t.Fatalf("Next after Close: %v", err)
				}
				if p2 := position(t, s); string(p2) != string(pos) {
					t.Fatalf("Position after Close %s, before %s", p2, pos)
				}
				s2 := mustOpen(t, cfg, pos)
				var rest []rec
				if bounded {
					rest = readToEOF(t, s2)
				} else {
					rest = readN(t, s2, len(want)-k)
					if more := readUntilBlocked(t, s2, 100*time.Millisecond); len(more) > 0 {
						t.Fatalf("k=%d: extra records %v", k, more)
					}
				}
				sameRecords(t, append(first, rest...), want)
				if t.Failed() {
					t.Fatalf("k=%d, position %s", k, pos)
				}
			}
		})
	}
}

func TestBoundedStopsAtFirstStartEnd(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 2}, kafkatest.Topic{Name: "empty", Partitions: 2})
	want := produceN(t, c, "t", 2, 5)
	cfg := testConfig(c, "t", "empty")
	cfg.Bounded = true
	s := mustOpen(t, cfg, nil)
	pos0 := position(t, s)
	produceN(t, c, "t", 2, 5) // after the first start: not part of the bounded run
	first := readN(t, s, 3)
	pos1 := position(t, s)
	rest := readToEOF(t, s)
	sameRecords(t, append(first, rest...), want)
	posEnd := position(t, s)

	// Restarts stop at the same place.
	sameRecords(t, readToEOF(t, mustOpen(t, cfg, pos0)), want)
	sameRecords(t, readToEOF(t, mustOpen(t, cfg, pos1)), rest)
	if got := readToEOF(t, mustOpen(t, cfg, posEnd)); len(got) != 0 {
		t.Fatalf("restart at the end returned %v", got)
	}
}

func TestBoundedEmptyTopicEndsAtOnce(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "empty", Partitions: 3})
	cfg := testConfig(c, "empty")
	cfg.Bounded = true
	s := mustOpen(t, cfg, nil)
	if s.cl != nil {
		t.Error("a consumer was started for a source with nothing to read")
	}
	if got := readToEOF(t, s); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestTransactionsOnlyCommitted(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 2})
	c.MustProduce(t, "t", 0, "a")
	c.MustProduceTxn(t, "tx1", true, "t", 0, "b", "c")
	c.MustProduceTxn(t, "tx2", false, "t", 0, "ABORTED-1", "ABORTED-2")
	c.MustProduce(t, "t", 0, "d")
	c.MustProduceTxn(t, "tx3", true, "t", 0, "e")
	c.MustProduceTxn(t, "tx4", false, "t", 0, "ABORTED-3") // the last offsets: aborted + marker
	c.MustProduceTxn(t, "tx5", true, "t", 1, "x")          // partition 1 ends with a commit marker
	wantVals := []string{"a", "b", "c", "d", "e", "x"}

	for _, bounded := range []bool{true, false} {
		cfg := testConfig(c, "t")
		cfg.Bounded = bounded
		s := mustOpen(t, cfg, nil)
		var got []rec
		if bounded {
			got = readToEOF(t, s)
		} else {
			got = readUntilBlocked(t, s, 300*time.Millisecond)
		}
		gv := values(got)
		slices.Sort(gv)
		if !slices.Equal(gv, wantVals) {
			t.Fatalf("bounded=%v: got %v, want %v", bounded, got, wantVals)
		}
		// Every origin is an offset of a data record: b and c at 1 and 2
		// (0 is a), d after tx1's marker and tx2's two records and marker.
		for _, r := range got {
			if r.Value == "d" && r.Origin != "t/0:7" {
				t.Errorf("d at %s, want t/0:7", r.Origin)
			}
		}
		if bounded {
			// The position went past the trailing aborted records and marker.
			var doc posDoc
			if err := json.Unmarshal(position(t, s), &doc); err != nil {
				t.Fatal(err)
			}
			for _, p := range doc.Partitions {
				if *p.Next != *p.End {
					t.Errorf("partition %d: next %d, end %d", *p.Partition, *p.Next, *p.End)
				}
			}
		}
	}
}

// TestOpenTransactionHoldsAtLSO: records after an undecided transaction
// are not returned until it is decided; in bounded mode the end is the last
// stable offset at the first start.
func TestOpenTransactionHoldsAtLSO(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	c.MustProduce(t, "t", 0, "a", "b")
	txn, _ := c.MustOpenTxn(t, "open", "t", 0, "c", "d")
	c.MustProduce(t, "t", 0, "e") // after the open transaction's records

	// Unbounded: a and b, then Next blocks until its ctx expires.
	cfg := testConfig(c, "t")
	s := mustOpen(t, cfg, nil)
	if got := values(readUntilBlocked(t, s, 500*time.Millisecond)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("before the commit: got %v, want [a b]", got)
	}
	// Bounded, started now: stops at the LSO (offset 2).
	bcfg := cfg
	bcfg.Bounded = true
	bs := mustOpen(t, bcfg, nil)
	if got := values(readToEOF(t, bs)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("bounded: got %v, want [a b]", got)
	}
	bpos := position(t, bs)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The cancelled Next lost nothing: the same source continues.
	if got := values(readN(t, s, 3)); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("after the commit: got %v, want [c d e]", got)
	}
	// A bounded restart still stops where the first start did.
	if got := readToEOF(t, mustOpen(t, bcfg, bpos)); len(got) != 0 {
		t.Fatalf("bounded restart after the commit: got %v", got)
	}
}

// TestAbortedTailBelowEnd: the last offsets below a bounded end are records
// of an aborted transaction whose abort marker lies past the end (another
// transaction was open when the end was listed). The consumer gets nothing
// for them; the source must still see that it reached the end.
func TestAbortedTailBelowEnd(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	c.MustProduce(t, "t", 0, "a")                      // 0
	txA, _ := c.MustOpenTxn(t, "A", "t", 0, "ABORTED") // 1
	txB, _ := c.MustOpenTxn(t, "B", "t", 0, "b")       // 2
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := txA.Abort(ctx); err != nil { // marker at 3; LSO 2 (B open)
		t.Fatal(err)
	}
	cfg := testConfig(c, "t")
	cfg.Bounded = true
	s := mustOpen(t, cfg, nil)
	if got := values(readToEOF(t, s)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %v, want [a]", got)
	}
	want := `{"v":1,"start":"earliest","bounded":true,"partitions":[{"topic":"t","partition":0,"next":2,"end":2}]}`
	if pos := position(t, s); string(pos) != want {
		t.Fatalf("position %s, want %s", pos, want)
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ucfg := testConfig(c, "t")
	if got := values(readN(t, mustOpen(t, ucfg, nil), 2)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("unbounded after B's commit: got %v, want [a b]", got)
	}
}

func TestStartLatest(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 2})
	produceN(t, c, "t", 2, 3)
	cfg := testConfig(c, "t")
	cfg.Start = "latest"
	s := mustOpen(t, cfg, nil)
	pos0 := position(t, s)
	if !strings.Contains(string(pos0), `"start":"latest"`) || !strings.Contains(string(pos0), `"next":3`) {
		t.Fatalf("position %s", pos0)
	}
	c.MustProduce(t, "t", 1, "new1")
	if got := readN(t, s, 1); got[0] != (rec{"t/1:3", "new1"}) {
		t.Fatalf("got %v", got)
	}
	s.Close()
	// A restart from the position taken before any record starts at the
	// same place, not at the new latest.
	c.MustProduce(t, "t", 0, "new0")
	s2 := mustOpen(t, cfg, pos0)
	got := readN(t, s2, 2)
	sameRecords(t, got, []rec{{"t/1:3", "new1"}, {"t/0:3", "new0"}})

	// Bounded latest: nothing to read.
	cfg.Bounded = true
	if got := readToEOF(t, mustOpen(t, cfg, nil)); len(got) != 0 {
		t.Fatalf("bounded latest: %v", got)
	}
}

func TestStartTimestamp(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i, v := range []string{"old1", "old2", "new1", "new2"} {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: 0, Value: []byte(v), Timestamp: t0.Add(time.Duration(i) * time.Hour)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.ProduceRecords(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	for start, resolved := range map[string]string{
		"2026-03-01T13:30:00Z":      "2026-03-01T13:30:00Z",
		"2026-03-01T15:00:00+01:00": "2026-03-01T14:00:00Z",
		"1772373600000":             "2026-03-01T14:00:00Z",
	} {
		cfg := testConfig(c, "t")
		cfg.Bounded = true
		cfg.Start = start
		s := mustOpen(t, cfg, nil)
		if got := values(readToEOF(t, s)); !slices.Equal(got, []string{"new1", "new2"}) {
			t.Errorf("start %s: got %v, want [new1 new2]", start, got)
		}
		if !strings.Contains(string(position(t, s)), `"start":"`+resolved+`"`) {
			t.Errorf("start %s: position %s", start, position(t, s))
		}
	}
	// A time after every record: nothing yet.
	cfg := testConfig(c, "t")
	cfg.Start = "2030-01-01T00:00:00Z"
	s := mustOpen(t, cfg, nil)
	if got := readUntilBlocked(t, s, 200*time.Millisecond); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
	c.MustProduce(t, "t", 0, "later")
	if got := values(readN(t, s, 1)); got[0] != "later" {
		t.Fatalf("got %v", got)
	}
}

func TestOpenErrors(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 2}, kafkatest.Topic{Name: "u", Partitions: 1})
	c.MustProduce(t, "t", 0, "a", "b")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	good := mustOpen(t, testConfig(c, "t"), nil)
	readN(t, good, 1)
	pos := position(t, good)

	cases := []struct {
		name   string
		cfg    func(Config) Config
		pos    string
		is     error
		inText []string
	}{
		{"unknown topic", func(c Config) Config { c.Topics = []string{"nope"}; return c }, "", ErrUnknownTopic,
			[]string{"topic nope does not exist on brokers " + c.Bootstrap()}},
		{"unknown partition", func(c Config) Config { c.Partitions = []int32{5}; return c }, "", ErrUnknownTopic,
			[]string{"partition 5 of topic t does not exist"}},
		{"garbage position", nil, "{not json", source.ErrBadPosition, []string{"kafka position"}},
		{"unknown field", nil, `{"v":1,"start":"earliest","bounded":false,"partitions":[{"topic":"t","partition":0,"next":1,"extra":1}]}`,
			source.ErrBadPosition, []string{`unknown field "extra"`}},
		{"negative offset", nil, `{"v":1,"start":"earliest","bounded":false,"partitions":[{"topic":"t","partition":0,"next":-1}]}`,
			source.ErrBadPosition, []string{"negative"}},
		{"wrong version", nil, `{"v":2,"start":"earliest","bounded":false,"partitions":[{"topic":"t","partition":0,"next":1}]}`,
			source.ErrBadPosition, []string{`"v":1`}},
		{"trailing data", nil, string(pos) + "{}", source.ErrBadPosition, []string{"trailing"}},
		{"other topics", func(c Config) Config { c.Topics = []string{"u"}; return c }, string(pos), source.ErrInputChanged,
			[]string{"kafka topics u", "position is for topics t"}},
		{"bounded mismatch", func(c Config) Config { c.Bounded = true; return c }, string(pos), source.ErrInputChanged,
			[]string{"bounded=false"}},
		{"partition subset mismatch", func(c Config) Config { c.Partitions = []int32{1}; return c }, string(pos), source.ErrInputChanged,
			[]string{"t/0"}},
		{"offset past the end", nil, `{"v":1,"start":"earliest","bounded":false,"partitions":[{"topic":"t","partition":0,"next":99}]}`,
			source.ErrInputChanged, []string{"kafka t/0", "offset 99", "recreated"}},
		{"bad config", func(c Config) Config { c.Topics = []string{"a b"}; c.Start = "yesterday"; return c }, "", nil,
			[]string{`topic "a b"`, `start "yesterday"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(c, "t")
			if tc.cfg != nil {
				cfg = tc.cfg(cfg)
			}
			var p json.RawMessage
			if tc.pos != "" {
				p = json.RawMessage(tc.pos)
			}
			s, err := Open(ctx, cfg, p)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not match %v", err, tc.is)
			}
			for _, w := range tc.inText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestUnreachableBrokers(t *testing.T) {
	// A port nobody listens on: start a cluster, note its address, close it.
	dead := kafkatest.Start(t)
	addr := dead.Addrs()[0]
	dead.Close()
	cfg := Config{Brokers: []string{addr}, Topics: []string{"t"}, ConnectTimeout: 500 * time.Millisecond}
	_, err := Open(context.Background(), cfg, nil)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connect timeout 500ms") {
		t.Fatalf("error %q does not name the broker and the timeout", err)
	}
	t.Log(err)
}

func TestCommitToGroup(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 2})
	produceN(t, c, "t", 2, 4)
	cfg := testConfig(c, "t")
	cfg.Group = "monitor"
	s := mustOpen(t, cfg, nil)
	got := readN(t, s, 5)
	pos := position(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := s.CommitToGroup(ctx, pos); err != nil {
		t.Fatal(err)
	}
	offs, err := s.adm.FetchOffsets(ctx, "monitor")
	if err != nil {
		t.Fatal(err)
	}
	next := map[int32]int64{}
	for _, r := range got {
		var p int32
		var o int64
		if _, err := fmt.Sscanf(r.Origin, "t/%d:%d", &p, &o); err != nil {
			t.Fatal(err)
		}
		next[p] = max(next[p], o+1)
	}
	for p := range int32(2) {
		o, ok := offs.Lookup("t", p)
		if want := next[p]; (want > 0 || ok) && o.At != want {
			t.Errorf("group offset of t/%d = %d, want %d", p, o.At, want)
		}
	}
	// Without a group it is a no-op.
	s2 := mustOpen(t, testConfig(c, "t"), nil)
	if err := s2.CommitToGroup(ctx, json.RawMessage("garbage")); err != nil {
		t.Fatalf("CommitToGroup without a group: %v", err)
	}
}

func TestNextAfterEOFAndClose(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	cfg := testConfig(c, "t")
	cfg.Bounded = true
	s := mustOpen(t, cfg, nil)
	if _, err := s.Next(context.Background()); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, source.ErrClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
	if !s.Replayable() {
		t.Fatal("not replayable")
	}
}

// TestNextDoesNotAllocate: records served from a fetched batch cost no
// allocation; the few per poll spread over many records.
func TestNextDoesNotAllocate(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	vals := make([]string, 2000)
	for i := range vals {
		vals[i] = fmt.Sprintf("record-%04d", i)
	}
	c.MustProduce(t, "t", 0, vals...)
	cfg := testConfig(c, "t")
	cfg.Bounded = true
	s := mustOpen(t, cfg, nil)
	readN(t, s, 1)
	ctx := context.Background()
	n := 0
	avg := testing.AllocsPerRun(1000, func() {
		r, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Value) != vals[r.Origin.Num] {
			t.Fatalf("record %s = %q", r.Origin, r.Value)
		}
		n++
	})
	if avg > 0.5 {
		t.Fatalf("%.2f allocations per Next", avg)
	}
	t.Logf("%.3f allocations per Next over %d records", avg, n)
}

// TestLag: after a fetch, Lag is the partition's last stable offset minus
// the next offset to read.
func TestLag(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	produceN(t, c, "t", 1, 30)
	s := mustOpen(t, testConfig(c, "t"), nil)
	if lag := s.Lag(); len(lag) != 0 {
		t.Errorf("Lag before any fetch = %v, want none", lag)
	}
	readN(t, s, 10)
	if lag := s.Lag(); lag["t/0"] != 20 || len(lag) != 1 {
		t.Errorf("Lag after 10 of 30 records = %v, want t/0: 20", lag)
	}
}
