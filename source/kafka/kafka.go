package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/filesink/filesink/source"
)

// Compile-time check.
var _ source.Source = (*Source)(nil)

// part is the state of one topic partition.
type part struct {
	topic     string
	partition int32
	name      string // "topic/partition", the Origin name
	next      int64  // offset of the next record to read
	end       int64  // bounded: offset to stop at; -1 unbounded
	done      bool   // bounded: next reached end
	stable    int64  // last stable offset in the last fetch; 0 before one
}

type tp struct {
	topic     string
	partition int32
}

// batch is the records of one fetched partition not yet returned.
type batch struct {
	p    *part
	recs []*kgo.Record
}

// Source reads records of Kafka topics with read_committed isolation,
// resuming at the offsets of a position. See the package documentation.
//
// A Source is not safe for concurrent use, except CommitToGroup, which may
// run concurrently with the other methods.
type Source struct {
	cfg     validated
	start   string // the resolved start, recorded in the position
	parts   []*part
	index   map[tp]*part
	topicID map[string][16]byte

	admCl *kgo.Client  // metadata, probes, group commits
	adm   *kadm.Client // over admCl
	cl    *kgo.Client  // the consumer; nil if nothing is left to read

	batches    []batch
	bi, ri     int   // next batch and record in it
	remaining  int   // bounded: partitions not done
	pendingErr error // a fetch error to return once the batches are drained
	err        error // sticky
	closed     bool
	closedFlag atomic.Bool // for CommitToGroup
	desc       string
	pauseBuf   map[string][]int32
}

// Open connects to the brokers of cfg and returns a source that resumes at
// pos, a document returned by Position (nil or JSON null: a first start,
// at cfg.Start).
//
// A first start resolves cfg.Start to an offset per partition, and in
// bounded mode lists each partition's last stable offset as its end; both
// go into the position. A resumed start checks that pos is for the same
// topics (and, if cfg.Partitions is set, the same partitions), the same
// bounded mode, and that its offsets still exist on the brokers; a
// mismatch is an error matching source.ErrInputChanged. In unbounded mode,
// partitions added to a topic since the position was taken are read from
// their start; in bounded mode they are ignored.
//
// Errors name the input: an unknown topic is an *UnknownTopicError, brokers
// that do not answer within cfg.ConnectTimeout an *UnreachableError, a
// malformed pos matches source.ErrBadPosition. A nil error guarantees that
// the brokers answered and every partition to read exists; records are
// fetched in the background from then on.
func Open(ctx context.Context, cfg Config, pos json.RawMessage) (_ *Source, err error) {
	v, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	var (
		doc     posDoc
		posPart []part
		resume  = !isNullPosition(pos)
	)
	if resume {
		if doc, posPart, err = decodePosition(pos); err != nil {
			return nil, err
		}
	}
	opts, err := v.clientOpts()
	if err != nil {
		return nil, err
	}
	admCl, hook, err := adminClient(opts)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: v, admCl: admCl, adm: kadm.NewClient(admCl), index: make(map[tp]*part), topicID: make(map[string][16]byte)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	cctx, cancel := context.WithTimeout(ctx, v.ConnectTimeout)
	defer cancel()
	exist, err := s.partitions(ctx, cctx, hook)
	if err != nil {
		return nil, err
	}
	want := func(p int32) bool { return len(v.Partitions) == 0 || slices.Contains(v.Partitions, p) }
	if resume {
		if err := s.resume(cctx, doc, posPart, exist); err != nil {
			return nil, err
		}
	} else if err := s.firstStart(cctx, exist, want); err != nil {
		return nil, err
	}
	for _, p := range s.parts {
		p.name = p.topic + "/" + strconv.Itoa(int(p.partition))
		s.index[tp{p.topic, p.partition}] = p
		if p.end >= 0 && p.next >= p.end {
			p.done = true
		}
		if !p.done {
			s.remaining++
		}
	}
	if err := s.startConsumer(opts); err != nil {
		return nil, err
	}
	s.desc = s.describe(resume)
	return s, nil
}

// partitions reads the topics' metadata (within cctx, the connect timeout
// of ctx) and returns the partitions that exist now; see listTopics.
func (s *Source) partitions(ctx, cctx context.Context, hook *connHook) (map[tp]bool, error) {
	exist, ids, err := listTopics(ctx, cctx, s.adm, s.cfg, hook)
	if err != nil {
		return nil, err
	}
	maps.Copy(s.topicID, ids)
	return exist, nil
}

// listTopics reads the metadata of v's topics (within cctx, the connect
// timeout of ctx) and returns the partitions that exist now and the topics'
// ids; a topic or a wanted partition that does not exist is an
// *UnknownTopicError, brokers that do not answer an *UnreachableError.
func listTopics(ctx, cctx context.Context, adm *kadm.Client, v validated, hook *connHook) (map[tp]bool, map[string][16]byte, error) {
	md, err := adm.Metadata(cctx, v.Topics...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("kafka: connect to brokers %s: %w", strings.Join(v.Brokers, ","), ctx.Err())
		}
		if _, ok := errors.AsType[*kerr.Error](err); ok {
			// The brokers answered, with an error (authorization...).
			return nil, nil, fmt.Errorf("kafka: metadata of topics %s from brokers %s: %w", strings.Join(v.Topics, ","), strings.Join(v.Brokers, ","), err)
		}
		if last := hook.lastErr(); last != nil && cctx.Err() != nil {
			err = last
		}
		ue := &UnreachableError{Brokers: v.Brokers, Timeout: v.ConnectTimeout, Err: err}
		if v.SASL != nil {
			ue.Hint = "or SASL authentication as " + strconv.Quote(v.SASL.User) + " with " + strings.ToUpper(v.SASL.Mechanism) + " failed"
		}
		return nil, nil, ue
	}
	exist := make(map[tp]bool)
	ids := make(map[string][16]byte, len(v.Topics))
	for _, t := range v.Topics {
		td, ok := md.Topics[t]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return nil, nil, &UnknownTopicError{Topic: t, Partition: -1, Brokers: v.Brokers}
		}
		if td.Err != nil {
			return nil, nil, fmt.Errorf("kafka: topic %s on brokers %s: %w", t, strings.Join(v.Brokers, ","), td.Err)
		}
		ids[t] = td.ID
		for p := range td.Partitions {
			exist[tp{t, p}] = true
		}
		for _, p := range v.Partitions {
			if !exist[tp{t, p}] {
				return nil, nil, &UnknownTopicError{Topic: t, Partition: p, Brokers: v.Brokers}
			}
		}
	}
	return exist, ids, nil
}

// startConsumer starts the consumer at exactly the positions' offsets of
// the partitions not done; none is started when every partition is done.
func (s *Source) startConsumer(opts []kgo.Opt) error {
	consume := make(map[string]map[int32]kgo.Offset)
	for _, p := range s.parts {
		if p.done {
			continue
		}
		if consume[p.topic] == nil {
			consume[p.topic] = make(map[int32]kgo.Offset)
		}
		consume[p.topic][p.partition] = kgo.NewOffset().At(p.next)
	}
	if len(consume) == 0 {
		return nil
	}
	copts := append(opts,
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(s.cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(s.cfg.FetchMaxPartitionBytes),
		// Without fetch sessions (KIP-227), which save a little request
		// size with many partitions: franz-go v1.22.3 kills a session at
		// Close while its fetch goroutine may still be updating it (a
		// data race the race detector reports in our tests).
		kgo.DisableFetchSessions(),
	)
	var err error
	if s.cl, err = kgo.NewClient(copts...); err != nil {
		return fmt.Errorf("kafka: new consumer: %w", err)
	}
	return nil
}

// firstStart resolves the start (and, bounded, the end) offsets of every
// wanted partition.
func (s *Source) firstStart(ctx context.Context, exist map[tp]bool, want func(int32) bool) error {
	v := s.cfg
	s.start = v.start.String()
	starts, ends, err := listStartsEnds(ctx, s.adm, v, v.Topics)
	if err != nil {
		return err
	}
	for k := range exist {
		if !want(k.partition) {
			continue
		}
		p := &part{topic: k.topic, partition: k.partition, end: -1}
		lo, err := lookup(starts, k, "start offset ("+s.start+")")
		if err != nil {
			return err
		}
		p.next = lo
		if v.Bounded {
			if p.end, err = lookup(ends, k, "last stable offset"); err != nil {
				return err
			}
		}
		s.parts = append(s.parts, p)
	}
	s.sortParts()
	return nil
}

// resume checks the position against the configuration and the brokers.
func (s *Source) resume(ctx context.Context, doc posDoc, pp []part, exist map[tp]bool) error {
	v := s.cfg
	s.start = doc.Start
	input := "kafka topics " + strings.Join(v.Topics, ",")
	var posTopics []string
	for _, p := range pp {
		if len(posTopics) == 0 || posTopics[len(posTopics)-1] != p.topic {
			posTopics = append(posTopics, p.topic)
		}
	}
	if !slices.Equal(posTopics, v.Topics) {
		return &source.InputChangedError{Input: input, Reason: fmt.Sprintf("the checkpoint position is for topics %s", strings.Join(posTopics, ","))}
	}
	if doc.Bounded != v.Bounded {
		return &source.InputChangedError{Input: input, Reason: fmt.Sprintf("the checkpoint position was taken with bounded=%t, the source is opened with bounded=%t", doc.Bounded, v.Bounded)}
	}
	inPos := make(map[tp]bool, len(pp))
	for i := range pp {
		p := pp[i]
		k := tp{p.topic, p.partition}
		inPos[k] = true
		if len(v.Partitions) > 0 && !slices.Contains(v.Partitions, p.partition) {
			return &source.InputChangedError{Input: input, Reason: fmt.Sprintf("the checkpoint position includes partition %s/%d, which is not among the partitions %v selected", p.topic, p.partition, v.Partitions)}
		}
		if !exist[k] {
			return &source.InputChangedError{Input: input, Reason: fmt.Sprintf("partition %s/%d of the checkpoint position no longer exists", p.topic, p.partition)}
		}
		s.parts = append(s.parts, &p)
	}
	var added []*part
	for k := range exist {
		if inPos[k] {
			continue
		}
		if len(v.Partitions) > 0 {
			if slices.Contains(v.Partitions, k.partition) {
				return &source.InputChangedError{Input: input, Reason: fmt.Sprintf("the checkpoint position lacks partition %s/%d", k.topic, k.partition)}
			}
			continue
		}
		if !v.Bounded {
			added = append(added, &part{topic: k.topic, partition: k.partition, end: -1})
		}
	}
	// Check the offsets still exist: records before the log start were
	// deleted (retention), offsets past the high watermark mean the topic
	// was recreated or truncated.
	starts, err := s.adm.ListStartOffsets(ctx, v.Topics...)
	if err != nil {
		return s.listErr("start offsets", err)
	}
	hwms, err := s.adm.ListEndOffsets(ctx, v.Topics...)
	if err != nil {
		return s.listErr("end offsets", err)
	}
	for _, p := range s.parts {
		if p.end >= 0 && p.next >= p.end {
			continue
		}
		k := tp{p.topic, p.partition}
		lo, err := lookup(starts, k, "start offset")
		if err != nil {
			return err
		}
		hi, err := lookup(hwms, k, "end offset")
		if err != nil {
			return err
		}
		switch {
		case p.next < lo:
			return &source.InputChangedError{Input: "kafka " + p.topic + "/" + strconv.Itoa(int(p.partition)),
				Reason: fmt.Sprintf("the checkpoint resumes at offset %d but the log now starts at offset %d: records were deleted", p.next, lo)}
		case p.next > hi:
			return &source.InputChangedError{Input: "kafka " + p.topic + "/" + strconv.Itoa(int(p.partition)),
				Reason: fmt.Sprintf("the checkpoint resumes at offset %d but the log now ends at offset %d: the topic was recreated or truncated", p.next, hi)}
		}
	}
	for _, p := range added {
		if p.next, err = lookup(starts, tp{p.topic, p.partition}, "start offset"); err != nil {
			return err
		}
		s.parts = append(s.parts, p)
	}
	s.sortParts()
	return nil
}

func (s *Source) sortParts() {
	slices.SortFunc(s.parts, func(a, b *part) int { return cmpPart(*a, *b) })
}

func (s *Source) listErr(what string, err error) error { return s.cfg.listErr(what, err) }

func (v validated) listErr(what string, err error) error {
	return fmt.Errorf("kafka: list %s of topics %s on brokers %s: %w", what, strings.Join(v.Topics, ","), strings.Join(v.Brokers, ","), err)
}

// listStartsEnds lists, for every partition of topics, the start offset of
// v.Start and, in bounded mode or for the start "latest", the last stable
// offset (the read_committed listing of the end).
func listStartsEnds(ctx context.Context, adm *kadm.Client, v validated, topics []string) (starts, ends kadm.ListedOffsets, err error) {
	if v.Bounded || v.start.mode == StartLatest {
		if ends, err = adm.ListCommittedOffsets(ctx, topics...); err != nil {
			return nil, nil, v.listErr("last stable offsets", err)
		}
	}
	switch v.start.mode {
	case StartEarliest:
		starts, err = adm.ListStartOffsets(ctx, topics...)
	case StartLatest:
		starts = ends
	default:
		starts, err = adm.ListOffsetsAfterMilli(ctx, v.start.milli, topics...)
	}
	if err != nil {
		return nil, nil, v.listErr("start offsets ("+v.start.String()+")", err)
	}
	return starts, ends, nil
}

func lookup(l kadm.ListedOffsets, k tp, what string) (int64, error) {
	o, ok := l.Lookup(k.topic, k.partition)
	switch {
	case !ok:
		return 0, fmt.Errorf("kafka: %s of %s/%d: not listed by the brokers", what, k.topic, k.partition)
	case o.Err != nil:
		return 0, fmt.Errorf("kafka: %s of %s/%d: %w", what, k.topic, k.partition, o.Err)
	case o.Offset < 0:
		return 0, fmt.Errorf("kafka: %s of %s/%d: the brokers returned %d", what, k.topic, k.partition, o.Offset)
	}
	return o.Offset, nil
}

func (s *Source) describe(resume bool) string {
	var b strings.Builder
	b.WriteString("kafka ")
	b.WriteString(strings.Join(s.cfg.Topics, ","))
	b.WriteString(" on ")
	b.WriteString(strings.Join(s.cfg.Brokers, ","))
	fmt.Fprintf(&b, " (%d partitions", len(s.parts))
	if len(s.cfg.Partitions) > 0 {
		fmt.Fprintf(&b, " %v", s.cfg.Partitions)
	}
	if s.cfg.Bounded {
		b.WriteString(", bounded")
	}
	if resume {
		b.WriteString(", resuming")
	} else {
		b.WriteString(", start " + s.start)
	}
	b.WriteString(")")
	return b.String()
}

// Next implements source.Source. It returns the committed records of every
// partition in offset order within a partition, skipping transaction
// markers and aborted records. It blocks until a record is fetched; in
// bounded mode it returns io.EOF once every partition reached its end
// offset. Cancelling ctx makes it return ctx.Err() with nothing lost.
// Record.Value is valid until the next call to Next or Close. Next does not
// allocate per record.
func (s *Source) Next(ctx context.Context) (source.Record, error) {
	if s.closed {
		return source.Record{}, source.ErrClosed
	}
	if s.err != nil {
		return source.Record{}, s.err
	}
	for {
		for s.bi < len(s.batches) {
			b := &s.batches[s.bi]
			p := b.p
			for s.ri < len(b.recs) {
				r := b.recs[s.ri]
				s.ri++
				if p.done || r.Offset < p.next {
					continue
				}
				if p.end >= 0 && r.Offset >= p.end {
					s.finish(p)
					continue
				}
				p.next = r.Offset + 1
				if p.end >= 0 && p.next >= p.end {
					s.finish(p)
				}
				if r.Attrs.IsControl() {
					continue
				}
				return source.Record{Value: r.Value, Key: r.Key, Origin: source.Origin{Name: p.name, Num: r.Offset}}, nil
			}
			b.recs = nil
			s.bi++
			s.ri = 0
		}
		if s.pendingErr != nil {
			s.err = s.pendingErr
			return source.Record{}, s.err
		}
		if s.cfg.Bounded && s.remaining == 0 {
			return source.Record{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return source.Record{}, err
		}
		if err := s.poll(ctx); err != nil {
			return source.Record{}, err
		}
	}
}

// finish marks p done: every record before its end was returned or
// skipped.
func (s *Source) finish(p *part) {
	if p.done {
		return
	}
	p.done = true
	if p.next < p.end {
		p.next = p.end
	}
	s.remaining--
	if s.cl != nil {
		if s.pauseBuf == nil {
			s.pauseBuf = make(map[string][]int32, 1)
		}
		clear(s.pauseBuf)
		s.pauseBuf[p.topic] = []int32{p.partition}
		s.cl.PauseFetchPartitions(s.pauseBuf)
	}
}

// poll waits for fetched records and queues them as batches. It returns a
// non-nil error only for a cancelled ctx; fetch errors are queued behind the
// records fetched with them.
func (s *Source) poll(ctx context.Context) error {
	s.batches = s.batches[:0]
	s.bi, s.ri = 0, 0
	if s.cl == nil { // bounded, nothing to consume, yet not done: cannot happen
		return errors.New("kafka: internal error: no consumer")
	}
	pctx := ctx
	if s.cfg.Bounded {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, s.cfg.probeInterval)
		defer cancel()
	}
	fs := s.cl.PollFetches(pctx)
	idle := false
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			for k := range t.Partitions {
				fp := &t.Partitions[k]
				if fp.Err != nil {
					switch {
					case t.Topic == "" && fp.Partition == -1 && (errors.Is(fp.Err, context.Canceled) || errors.Is(fp.Err, context.DeadlineExceeded)):
						idle = true
					case s.pendingErr == nil:
						s.pendingErr = s.fetchErr(t.Topic, fp.Partition, fp.Err)
					}
				}
				p := s.index[tp{t.Topic, fp.Partition}]
				if p != nil && fp.Err == nil {
					// read_committed reads up to the last stable offset.
					if fp.LastStableOffset >= 0 {
						p.stable = fp.LastStableOffset
					} else if fp.HighWatermark >= 0 {
						p.stable = fp.HighWatermark
					}
				}
				if len(fp.Records) == 0 || p == nil {
					continue
				}
				s.batches = append(s.batches, batch{p: p, recs: fp.Records})
			}
		}
	}
	if len(s.batches) > 0 || s.pendingErr != nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if idle && s.cfg.Bounded {
		s.probe(ctx)
	}
	return nil
}

func (s *Source) fetchErr(topic string, partition int32, err error) error {
	p := s.index[tp{topic, partition}]
	var at int64 = -1
	if p != nil {
		at = p.next
	}
	if errors.Is(err, kerr.OffsetOutOfRange) {
		return &source.InputChangedError{Input: "kafka " + topic + "/" + strconv.Itoa(int(partition)),
			Reason: fmt.Sprintf("offset %d is out of range: records were deleted (retention) or the topic was recreated", at)}
	}
	return fmt.Errorf("kafka: fetch %s/%d at offset %d from brokers %s: %w", topic, partition, at, strings.Join(s.cfg.Brokers, ","), err)
}

// probe runs in bounded mode when nothing was fetched for a while. A
// partition whose records below its end offset are all aborted, with the
// abort marker at or past the end, gives the consumer nothing to return, so
// Next would never see the end. probe fetches each waiting partition
// directly from its leader, from its next offset, and marks it done when
// nothing below the end would be returned. Errors are ignored: the
// consumer reports real problems, and the next probe tries again.
func (s *Source) probe(ctx context.Context) {
	md, err := s.adm.Metadata(ctx, s.cfg.Topics...)
	if err != nil {
		return
	}
	for _, p := range s.parts {
		if p.done {
			continue
		}
		td, ok := md.Topics[p.topic]
		if !ok {
			continue
		}
		pd, ok := td.Partitions[p.partition]
		if !ok || pd.Leader < 0 {
			continue
		}
		if off, ok := s.probePartition(ctx, p, pd.Leader, td.ID); ok && off >= p.end {
			s.finish(p)
		}
	}
}

// probeMaxBytes is the fetch size of a probe: small, since a probe stops at
// the first record the consumer would return (a broker returns at least one
// whole batch whatever the limit).
const probeMaxBytes = 1 << 20

// probePartition reads p from p.next towards p.end with read_committed
// isolation; see probeFetch.
func (s *Source) probePartition(ctx context.Context, p *part, leader int32, topicID [16]byte) (int64, bool) {
	return probeFetch(ctx, s.admCl, leader, p.topic, p.partition, topicID, p.next, p.end)
}

// probeFetch reads topic/partition from its leader, from offset from
// towards end, with read_committed isolation. It returns the offset it got
// to and true if no record (data or marker) below end would be returned to
// a consumer; false if one would, or on any error.
func probeFetch(ctx context.Context, cl *kgo.Client, leader int32, topic string, partition int32, topicID [16]byte, from, end int64) (int64, bool) {
	off := from
	for range 1000 {
		if off >= end {
			return off, true
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = probeMaxBytes
		req.IsolationLevel = 1
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.TopicID = topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = partition
		rp.FetchOffset = off
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = probeMaxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return off, false
		}
		resp := kresp.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return off, false
		}
		rpr := &resp.Topics[0].Partitions[0]
		if rpr.ErrorCode != 0 || rpr.Partition != partition {
			return off, false
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			KeepControlRecords: true,
			Offset:             off,
			IsolationLevel:     kgo.ReadCommitted(),
			Topic:              topic,
			Partition:          partition,
		}, rpr, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return off, false
		}
		for _, r := range fp.Records {
			if r.Offset < end {
				return off, false
			}
		}
		if next <= off {
			return off, false
		}
		off = next
	}
	return off, false
}

// Position implements source.Source: the JSON document
//
//	{"v":1,"start":"earliest","bounded":false,
//	 "partitions":[{"topic":"t","partition":0,"next":42}, ...]}
//
// with, per partition, the offset after the last record Next returned (or
// after the transaction markers and aborted records that followed it), and
// in bounded mode "end", the offset it stops at. "start" is how the first
// start was resolved. It may be called after Close.
func (s *Source) Position() (json.RawMessage, error) {
	return appendPosition(make([]byte, 0, 64+64*len(s.parts)), s.start, s.cfg.Bounded, s.parts), nil
}

// Lag returns, for every partition read ("topic/partition"), how many
// offsets lie between the next record to read and the last stable offset
// seen in the latest fetch (the high watermark for a partition without
// transactions): the consumer lag a monitor shows. A partition not
// fetched yet is absent. Not safe for concurrent use (call it from the
// goroutine that calls Next).
func (s *Source) Lag() map[string]int64 {
	lag := make(map[string]int64, len(s.parts))
	for _, p := range s.parts {
		if p.stable > 0 {
			lag[p.topic+"/"+strconv.Itoa(int(p.partition))] = max(p.stable-p.next, 0)
		}
	}
	return lag
}

// ValuesRetained implements source.Retained: a record's value is the
// fetch's memory, allocated for each fetch and never reused, so it stays
// valid as long as it is referenced.
func (s *Source) ValuesRetained() bool { return true }

var _ source.Retained = (*Source)(nil)

// Replayable implements source.Source: it returns true.
func (s *Source) Replayable() bool { return true }

// Describe implements source.Source, e.g. "kafka events on
// 10.0.0.1:9092 (6 partitions, bounded, start earliest)". It never contains
// credentials.
func (s *Source) Describe() string { return s.desc }

// Close implements source.Source: it closes the connections to the
// brokers. Calling it again does nothing.
func (s *Source) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.closedFlag.Store(true)
	s.batches = nil
	if s.cl != nil {
		s.cl.Close()
	}
	s.admCl.Close()
	return nil
}

// CommitToGroup commits the offsets of pos, a document returned by
// Position (normally the one stored in a decided checkpoint), to the
// consumer group of Config.Group, so that lag monitoring sees the
// pipeline's progress. It does nothing if no group was configured. The
// source never reads these offsets back: exactly-once comes from the
// checkpoint, and a failure here loses nothing. The group must not be used
// by live consumers (the brokers reject commits for a group with members).
//
// CommitToGroup is safe to call concurrently with the other methods. A
// nil error guarantees that the brokers stored every partition's offset.
func (s *Source) CommitToGroup(ctx context.Context, pos json.RawMessage) error {
	if s.cfg.Group == "" {
		return nil
	}
	if s.closedFlag.Load() {
		return source.ErrClosed
	}
	_, parts, err := decodePosition(pos)
	if err != nil {
		return err
	}
	offs := make(kadm.Offsets)
	for _, p := range parts {
		if !slices.Contains(s.cfg.Topics, p.topic) {
			return &source.InputChangedError{Input: "kafka topics " + strings.Join(s.cfg.Topics, ","), Reason: "the position to commit is for topic " + p.topic}
		}
		offs.Add(kadm.Offset{Topic: p.topic, Partition: p.partition, At: p.next, LeaderEpoch: -1})
	}
	resp, err := s.adm.CommitOffsets(ctx, s.cfg.Group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("kafka: commit offsets to group %s: %w", s.cfg.Group, err)
	}
	return nil
}

// connHook remembers the last failed dial, for UnreachableError.
type connHook struct {
	mu   sync.Mutex
	last error
}

func (h *connHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.mu.Lock()
		h.last = err
		h.mu.Unlock()
	}
}

func (h *connHook) lastErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
