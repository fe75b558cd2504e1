package s3

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/recovery"
)

// Group mode: each topic partition a job's processes share is a lane, whose
// state is one object, PREFIX/lanes/<topic>/<partition>/HEAD: the lane's
// owner (an epoch that grows by one at every takeover) and its newest
// checkpoint record. Every write of it is conditional (If-None-Match: * to
// create it, If-Match on the ETag last read or written to replace it), so
// the store itself fences an owner that another process took the lane from:
// the HEAD is both the fence and the commit point of the lane.

// LanesDir is the directory of the lanes' HEAD objects under a state
// prefix.
const LanesDir = "lanes"

// LaneHeadFile is the name of a lane's state object:
// PREFIX/lanes/<topic>/<partition>/HEAD.
const LaneHeadFile = "HEAD"

// LaneHeadVersion is the LaneHead.V this build writes and reads.
const LaneHeadVersion = 1

// The points at which a LaneStore calls its hook (SetHook).
const (
	// HookTakeoverRead: in Acquire, after each read of the HEAD, before the
	// takeover is written.
	HookTakeoverRead = "takeover:read"
	// HookTakeoverCAS: in Acquire, after the takeover was written.
	HookTakeoverCAS = "takeover:cas"
	// HookDecided: in Put, after the record was written (decided).
	HookDecided = "lane:decided"
)

// ErrFenced is matched (errors.Is) by the error of a LaneStore whose lane
// another owner took over (or whose HEAD was replaced or deleted by anyone
// else): the store decides nothing more, and every later call fails with
// it.
var ErrFenced = errors.New("lane fenced: another owner took the lane over")

// ErrStaleGeneration is matched by the error of Acquire when the lane's
// owner holds it for a newer consumer group generation than the one given:
// the caller's assignment is outdated, and the HEAD is left as it was.
var ErrStaleGeneration = errors.New("stale group generation")

// LaneOwner identifies the process that owns a lane.
type LaneOwner struct {
	Member     string `json:"member"`     // Kafka group member id
	Generation int32  `json:"generation"` // group generation of the assignment
	Host       string `json:"host"`
	PID        int    `json:"pid"`
	RunID      string `json:"run_id"`
}

// LaneHead is the content of a lane's HEAD object.
type LaneHead struct {
	V         int       `json:"v"` // LaneHeadVersion
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Epoch     uint64    `json:"owner_epoch"` // +1 on every takeover
	Seq       uint64    `json:"seq"`         // +1 on every write: no two versions share bytes (no ABA on If-Match)
	Owner     LaneOwner `json:"owner"`
	Released  bool      `json:"released"` // the owner handed it off cleanly
	Done      bool      `json:"done"`     // bounded: the lane reached its end and all is committed
	// Swept: a finished lane that one process took over once more to
	// sweep what older owners left (ClaimSweep); no other process does.
	Swept bool `json:"swept,omitempty"`
	// Checkpoint is the lane's newest record; nil before the first one.
	Checkpoint *recovery.Checkpoint `json:"checkpoint,omitempty"`
	Updated    time.Time            `json:"updated"`
}

// clone returns a deep copy of h.
func (h *LaneHead) clone() *LaneHead {
	c := *h
	c.Checkpoint = cloneCheckpoint(h.Checkpoint)
	return &c
}

func cloneCheckpoint(c *recovery.Checkpoint) *recovery.Checkpoint {
	if c == nil {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("s3: checkpoint %d does not encode: %v", c.ID, err)) // it was encoded before
	}
	var out recovery.Checkpoint
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("s3: checkpoint %d does not decode: %v", c.ID, err))
	}
	return &out
}

// laneFrame is the stored form of a LaneHead: the head's JSON and its
// CRC-32C (Castagnoli), as 8 hex digits.
type laneFrame struct {
	CRC32C string          `json:"crc32c"`
	Head   json.RawMessage `json:"head"`
}

// crc32c is the CRC-32C (Castagnoli) of b.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

func encodeLaneHead(h *LaneHead) ([]byte, error) {
	p, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode lane %s/%d: %w", h.Topic, h.Partition, err)
	}
	return fmt.Appendf(nil, "{\"crc32c\":\"%08x\",\"head\":%s}\n", crc32c(p), p), nil
}

// decodeLaneHead parses the HEAD read from file (an s3:// URL, for errors)
// of lane topic/partition. Any defect is a *recovery.CorruptError.
func decodeLaneHead(file, topic string, partition int32, b []byte) (*LaneHead, error) {
	bad := func(format string, args ...any) error {
		return &recovery.CorruptError{File: file, Reason: fmt.Sprintf(format, args...), Err: recovery.ErrCorruptCheckpoint}
	}
	var f laneFrame
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, bad("not a lane HEAD: %v", err)
	}
	if dec.More() {
		return nil, bad("not a lane HEAD: trailing data")
	}
	want, err := strconv.ParseUint(f.CRC32C, 16, 32)
	if err != nil || len(f.CRC32C) != 8 || len(f.Head) == 0 {
		return nil, bad("lane HEAD without a valid checksum or head")
	}
	if sum := crc32c(f.Head); sum != uint32(want) {
		return nil, bad("checksum mismatch: computed %08x, recorded %s", sum, f.CRC32C)
	}
	var h LaneHead
	if err := json.Unmarshal(f.Head, &h); err != nil {
		return nil, bad("head: %v", err)
	}
	switch {
	case h.V != LaneHeadVersion:
		return nil, &recovery.CorruptError{File: file, Reason: fmt.Sprintf("lane HEAD version %d, this build reads version %d", h.V, LaneHeadVersion), Err: recovery.ErrUnsupportedVersion}
	case h.Topic != topic || h.Partition != partition:
		return nil, bad("the HEAD says lane %s/%d", h.Topic, h.Partition)
	case h.Epoch == 0 || h.Seq == 0:
		return nil, bad("owner epoch %d, seq %d: both start at 1", h.Epoch, h.Seq)
	}
	return &h, nil
}

// checkLane validates a lane's topic (a Kafka topic name: 1 to 249 of
// a-z A-Z 0-9 . _ -, not "." or "..") and partition (not negative).
func checkLane(topic string, partition int32) error {
	ok := topic != "" && len(topic) <= 249 && topic != "." && topic != ".."
	for _, c := range topic {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("s3: lane %q/%d: invalid topic name", topic, partition)
	}
	if partition < 0 {
		return fmt.Errorf("s3: lane %s/%d: negative partition", topic, partition)
	}
	return nil
}

func (s *Store) laneDir(topic string, partition int32) string {
	return s.dir() + LanesDir + "/" + topic + "/" + strconv.FormatInt(int64(partition), 10)
}

func (s *Store) laneKey(topic string, partition int32) string {
	return s.laneDir(topic, partition) + "/" + LaneHeadFile
}

// readLaneHead reads the HEAD at key: nil if there is none, its bytes and
// its ETag.
func (s *Store) readLaneHead(ctx context.Context, key, topic string, partition int32) (*LaneHead, []byte, string, error) {
	out, err := s.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &s.bucket, Key: &key}, s.call())
	if isNotFound(err) {
		return nil, nil, "", nil
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("lane %s: read: %w", s.url(key), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxRecord))
	if err != nil {
		return nil, nil, "", fmt.Errorf("lane %s: read: %w", s.url(key), err)
	}
	h, err := decodeLaneHead(s.url(key), topic, partition, b)
	if err != nil {
		return nil, nil, "", err
	}
	return h, b, aws.ToString(out.ETag), nil
}

// writeLaneHead writes b to key with If-Match: ifMatch, or If-None-Match: *
// when ifMatch is "", and returns the new ETag.
func (s *Store) writeLaneHead(ctx context.Context, key string, b []byte, ifMatch string) (string, error) {
	in := &s3api.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))),
		ContentType:          aws.String("application/json"),
		ServerSideEncryption: s.o.sseType(), SSEKMSKeyId: s.o.kmsKey(),
	}
	if s.o.checksums {
		in.ChecksumCRC32 = crcBase64(crc32.ChecksumIEEE(b))
	}
	if ifMatch == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(ifMatch)
	}
	out, err := s.client.PutObject(ctx, in, s.call())
	if isNotImplemented(err) {
		return "", fmt.Errorf("lane %s: %w (%v)", s.url(key), errNoConditionalWrites, err)
	}
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// errNoConditionalWrites: the store refused If-Match or If-None-Match.
var errNoConditionalWrites = errors.New("the store does not support conditional writes (If-Match, If-None-Match), which group mode needs")

// isConflict: a conditional write refused because the object is not the
// version it named (412), another conditional write raced it (409
// ConditionalRequestConflict), or the object is gone (If-Match on a
// missing key).
func isConflict(err error) bool {
	return isPreconditionFailed(err) || apiCode(err) == "ConditionalRequestConflict" || httpStatus(err) == 409 || isNotFound(err)
}

// ReadLane reads the HEAD of lane topic/partition of the job whose state
// is s: nil (and no error) if there is none, else the head and its ETag. A
// defective HEAD is a *recovery.CorruptError naming its object.
func ReadLane(ctx context.Context, s *Store, topic string, partition int32) (*LaneHead, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := checkLane(topic, partition); err != nil {
		return nil, "", err
	}
	h, _, etag, err := s.readLaneHead(ctx, s.laneKey(topic, partition), topic, partition)
	return h, etag, err
}

// Held reports whether the lane may have a live owner: its owner neither
// released it nor finished it, and is not known to be dead (a process of
// this host that is gone). A process of another host that died counts as
// held: nothing here tells it from a live one.
func (h *LaneHead) Held() bool {
	if h.Released || h.Done {
		return false
	}
	host, _ := os.Hostname()
	return h.Owner.Host != host || h.Owner.PID <= 0 || processAlive(h.Owner.PID)
}

// ListLanes reads every lane HEAD of the job whose state is s (under
// PREFIX/lanes/), sorted by topic and partition. An object there that is not
// a lane's HEAD, or a defective HEAD, is a *recovery.CorruptError naming it.
func ListLanes(ctx context.Context, s *Store) ([]*LaneHead, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type lane struct {
		topic     string
		partition int32
		key       string
	}
	var lanes []lane
	dir := s.dir() + LanesDir + "/"
	p := s3api.NewListObjectsV2Paginator(s.client, &s3api.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(dir)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx, s.call())
		if err != nil {
			return nil, fmt.Errorf("lanes of %s: %w", s.Location(), err)
		}
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			topic, partition, ok := parseLaneKey(strings.TrimPrefix(key, dir))
			if !ok {
				return nil, &recovery.CorruptError{File: s.url(key), Reason: "unexpected object among the lanes", Err: recovery.ErrCorruptCheckpoint}
			}
			lanes = append(lanes, lane{topic, partition, key})
		}
	}
	slices.SortFunc(lanes, func(a, b lane) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	heads := make([]*LaneHead, 0, len(lanes))
	for _, l := range lanes {
		h, _, _, err := s.readLaneHead(ctx, l.key, l.topic, l.partition)
		if err != nil {
			return nil, err
		}
		if h != nil { // else deleted since the listing: not a lane any more
			heads = append(heads, h)
		}
	}
	return heads, nil
}

// parseLaneKey parses "<topic>/<partition>/HEAD".
func parseLaneKey(rel string) (topic string, partition int32, ok bool) {
	parts := strings.Split(rel, "/")
	if len(parts) != 3 || parts[2] != LaneHeadFile {
		return "", 0, false
	}
	n, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || strconv.FormatInt(n, 10) != parts[1] || checkLane(parts[0], int32(n)) != nil {
		return "", 0, false
	}
	return parts[0], int32(n), true
}

// LaneStore is one lane's state, and the recovery.Store of the lane's
// pipeline: its checkpoint records live in the lane's HEAD, one at a time,
// and its job id and job records in the job's Store. It needs and takes no
// lease of the Store (Store.Acquire): the HEAD fences other owners.
//
// Acquire takes the lane over; afterwards Put and Release write the next
// version of the HEAD with If-Match on the ETag of the version this store
// last wrote, each with the seq one higher. A write refused or whose reply
// was lost (412, 409, a timeout, a reset, a 5xx after the retries) is
// resolved by reading the HEAD back: this write's exact bytes mean
// written; the version this store last wrote, unchanged, means not
// written (an error that is not ErrFenced, and the store goes on); any
// other version means another owner took over: ErrFenced, and from then
// on every call that returns an error fails with ErrFenced.
//
// A LaneStore is safe for concurrent use: its writes are serialized, and
// List, Get and the accessors wait for a write in progress.
type LaneStore struct {
	s         *Store
	topic     string
	partition int32
	key       string

	op sync.Mutex // serializes Acquire, Put and Release

	mu     sync.Mutex // guards the fields below
	head   *LaneHead  // the version last written or adopted, nil before Acquire
	body   []byte     // its bytes
	etag   string     // its ETag
	doubt  [][]byte   // versions written with an unknown outcome, which may land later
	fenced error      // once fenced: the error every call returns
	hook   func(point string) error

	ownerGone  func(LaneOwner) bool // see IgnoreGenerationOf; set before Acquire
	claimSweep bool                 // Acquire claims the end-of-job sweep (ClaimSweep)
}

// ErrSwept is matched by the error of ClaimSweep when another process
// claimed the lane's end-of-job sweep (or the lane is not finished).
var ErrSwept = errors.New("lane swept by another process, or not finished")

// ClaimSweep is Acquire for the end-of-job sweep of a finished lane: the
// HEAD it writes is also marked Swept, in the same conditional write, and
// a HEAD already marked (or not Done) is refused with an error matching
// ErrSwept. Of the processes that find the job finished, one sweeps each
// lane.
func (l *LaneStore) ClaimSweep(ctx context.Context, owner LaneOwner) (*LaneHead, error) {
	l.claimSweep = true
	return l.Acquire(ctx, owner, nil)
}

var _ recovery.Store = (*LaneStore)(nil)

// IgnoreGenerationOf makes Acquire take the lane over from a HEAD owner
// with a newer group generation when gone reports that owner is no longer
// a member of the group: the group was deleted (its offsets expired, an
// operator removed it) and its generations began again, so the recorded
// generation proves nothing. The fence does not rest on generations (the
// conditional write does): this only lifts the tie-break that keeps a
// member with an outdated assignment from taking a lane from a newer one.
// Call it before Acquire; not safe for concurrent use with Acquire.
func (l *LaneStore) IgnoreGenerationOf(gone func(LaneOwner) bool) { l.ownerGone = gone }

// laneAttempts bounds the rounds of Acquire that end in a conflict with
// another writer of the HEAD.
const laneAttempts = 8

// maxDoubt bounds the versions of unknown outcome a LaneStore remembers.
const maxDoubt = 8

// NewLaneStore returns the store of lane (topic, partition) of the job
// whose state is s (an *s3.Store on the state prefix). It does no I/O; an
// invalid topic or partition is reported by Acquire.
func NewLaneStore(s *Store, topic string, partition int32) *LaneStore {
	return &LaneStore{s: s, topic: topic, partition: partition, key: s.laneKey(topic, partition)}
}

// SetHook sets a function called at the points HookTakeoverRead,
// HookTakeoverCAS and HookDecided, for tests that crash or pause a process
// there: an error from it is returned by the call (after the write, for
// the latter two). nil removes it.
func (l *LaneStore) SetHook(hook func(point string) error) {
	l.mu.Lock()
	l.hook = hook
	l.mu.Unlock()
}

func (l *LaneStore) callHook(point string) error {
	l.mu.Lock()
	hook := l.hook
	l.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook(point)
}

// Key returns the key of the lane's HEAD ("PREFIX/lanes/t/3/HEAD").
func (l *LaneStore) Key() string { return l.key }

// Location implements recovery.Store: "s3://bucket/PREFIX/lanes/t/3".
func (l *LaneStore) Location() string { return l.s.url(l.s.laneDir(l.topic, l.partition)) }

func (l *LaneStore) url() string { return l.s.url(l.key) }

// Epoch returns the owner epoch this store holds, 0 before Acquire.
func (l *LaneStore) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head == nil {
		return 0
	}
	return l.head.Epoch
}

// Head returns a copy of the version of the HEAD this store last wrote or
// read, nil before Acquire.
func (l *LaneStore) Head() *LaneHead {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head == nil {
		return nil
	}
	return l.head.clone()
}

// current returns the head held, or the error of a store that is fenced or
// was never acquired.
func (l *LaneStore) current() (*LaneHead, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced != nil {
		return nil, l.fenced
	}
	if l.head == nil {
		return nil, fmt.Errorf("lane %s: not acquired (Acquire first)", l.url())
	}
	return l.head, nil
}

func (l *LaneStore) fencedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced
}

// adopt makes body (decoded as h), ETag etag, the version this store holds.
// Versions of unknown outcome can no longer land once a newer one is
// there: they are forgotten.
func (l *LaneStore) adopt(h *LaneHead, body []byte, etag string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.head, l.body, l.etag, l.doubt = h, body, etag, nil
}

func (l *LaneStore) addDoubt(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.doubt) == maxDoubt {
		l.doubt = l.doubt[1:]
	}
	l.doubt = append(l.doubt, b)
}

func (l *LaneStore) isDoubt(b []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.doubt {
		if bytes.Equal(d, b) {
			return true
		}
	}
	return false
}

// fence records that cur (nil: no HEAD) replaced the version this store
// holds and returns the error every call returns from now on.
func (l *LaneStore) fence(cur *LaneHead) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced != nil {
		return l.fenced
	}
	var ours uint64
	if l.head != nil {
		ours = l.head.Epoch
	}
	if cur == nil {
		l.fenced = fmt.Errorf("lane %s: owner epoch %d fenced: the HEAD was deleted: %w", l.url(), ours, ErrFenced)
	} else {
		l.fenced = fmt.Errorf("lane %s: owner epoch %d fenced: the HEAD has owner epoch %d (member %q, generation %d, host %s, pid %d): %w",
			l.url(), ours, cur.Epoch, cur.Owner.Member, cur.Owner.Generation, cur.Owner.Host, cur.Owner.PID, ErrFenced)
	}
	return l.fenced
}

// Acquire takes the lane over for owner. It reads the HEAD; if there is
// none, it creates it with If-None-Match: * as {epoch 1, seq 1, owner,
// Checkpoint: init()} (init may be nil: no checkpoint yet); if there is
// one, it refuses with an error matching ErrStaleGeneration when the
// HEAD's owner has a newer group generation than owner (and leaves the
// HEAD as it was), else it writes {epoch+1, seq+1, owner, released false,
// the same done and checkpoint} with If-Match on the ETag read. When
// another writer came first (412, 409), it reads again and retries, at
// most a few times, with a growing random backoff. A nil error means this
// store owns the lane with the returned head (a copy): the HEAD says so,
// and every older owner is fenced. A store is acquired at most once; a
// fenced one fails with ErrFenced. The hook points are HookTakeoverRead
// and HookTakeoverCAS.
func (l *LaneStore) Acquire(ctx context.Context, owner LaneOwner, init func() *recovery.Checkpoint) (*LaneHead, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkLane(l.topic, l.partition); err != nil {
		return nil, err
	}
	l.op.Lock()
	defer l.op.Unlock()
	if err := l.fencedErr(); err != nil {
		return nil, err
	}
	if l.Epoch() != 0 {
		return nil, fmt.Errorf("lane %s: acquired before", l.url())
	}
	var werr error
	for attempt := 1; ; attempt++ {
		cur, body, etag, err := l.s.readLaneHead(ctx, l.key, l.topic, l.partition)
		if err != nil {
			return nil, errors.Join(err, werr)
		}
		if err := l.callHook(HookTakeoverRead); err != nil {
			return nil, err
		}
		if cur != nil && l.isDoubt(body) {
			return l.acquired(cur, body, etag) // an earlier attempt's write landed
		}
		if werr != nil && !isConflict(werr) {
			return nil, fmt.Errorf("lane %s: take over: %w", l.url(), werr)
		}
		if attempt > laneAttempts {
			return nil, fmt.Errorf("lane %s: the HEAD changed %d times while this owner tried to take it over: %w", l.url(), laneAttempts, werr)
		}
		next, err := l.takeover(cur, owner, init)
		if err != nil {
			return nil, err
		}
		b, err := encodeLaneHead(next)
		if err != nil {
			return nil, err
		}
		newTag, err := l.s.writeLaneHead(ctx, l.key, b, etag)
		if err == nil {
			return l.acquired(next, b, newTag)
		}
		if errors.Is(err, errNoConditionalWrites) {
			return nil, err
		}
		l.addDoubt(b)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lane %s: take over: %w", l.url(), err)
		}
		werr = err
		if isConflict(err) {
			if err := sleepCtx(ctx, laneBackoff(attempt)); err != nil {
				return nil, err
			}
		}
	}
}

// takeover returns the head that takes cur (nil: none) over for owner.
func (l *LaneStore) takeover(cur *LaneHead, owner LaneOwner, init func() *recovery.Checkpoint) (*LaneHead, error) {
	now := time.Now().UTC()
	if l.claimSweep && (cur == nil || cur.Swept || !cur.Done) {
		return nil, fmt.Errorf("lane %s: %w", l.url(), ErrSwept)
	}
	if cur == nil {
		var c *recovery.Checkpoint
		if init != nil {
			c = init()
		}
		return &LaneHead{V: LaneHeadVersion, Topic: l.topic, Partition: l.partition, Epoch: 1, Seq: 1,
			Owner: owner, Checkpoint: c, Updated: now}, nil
	}
	if cur.Owner.Generation > owner.Generation && (l.ownerGone == nil || !l.ownerGone(cur.Owner)) {
		return nil, fmt.Errorf("lane %s: this owner's group generation %d is older than generation %d of the lane's owner (member %q, owner epoch %d): %w",
			l.url(), owner.Generation, cur.Owner.Generation, cur.Owner.Member, cur.Epoch, ErrStaleGeneration)
	}
	next := *cur
	next.Epoch++
	next.Seq++
	next.Owner = owner
	next.Released = false
	next.Updated = now
	next.Swept = cur.Swept || l.claimSweep
	return &next, nil
}

// acquired adopts the version written by Acquire and calls the hook.
func (l *LaneStore) acquired(h *LaneHead, body []byte, etag string) (*LaneHead, error) {
	// The head as stored (what a reader decodes), not the caller's pointers.
	stored, err := decodeLaneHead(l.url(), l.topic, l.partition, body)
	if err != nil {
		return nil, err
	}
	l.adopt(stored, body, etag)
	if err := l.callHook(HookTakeoverCAS); err != nil {
		return nil, err
	}
	return stored.clone(), nil
}

// laneBackoff is the wait before attempt+1 of Acquire: random, up to
// 25 ms doubling per attempt, at most 1 s.
func laneBackoff(attempt int) time.Duration {
	ceiling := min(25*time.Millisecond<<min(attempt-1, 6), time.Second)
	return rand.N(ceiling) + time.Millisecond
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errNoWrite tells update that the HEAD already says what mutate wants.
var errNoWrite = errors.New("nothing to write")

// update writes the next version of the HEAD: the one held, changed by
// mutate, with the seq one higher, If-Match on the ETag held. See
// LaneStore for how a failed write is resolved. what names the write in
// errors.
func (l *LaneStore) update(ctx context.Context, what string, mutate func(*LaneHead) error) error {
	l.op.Lock()
	defer l.op.Unlock()
	for round := 0; ; round++ {
		head, err := l.current()
		if err != nil {
			return err
		}
		next := *head
		if err := mutate(&next); err != nil {
			return err
		}
		next.Seq = head.Seq + 1
		next.Updated = time.Now().UTC()
		b, err := encodeLaneHead(&next)
		if err != nil {
			return err
		}
		l.mu.Lock()
		held, etag := l.body, l.etag
		l.mu.Unlock()
		newTag, werr := l.s.writeLaneHead(ctx, l.key, b, etag)
		if werr == nil {
			l.adopt(&next, b, newTag)
			return nil
		}
		if errors.Is(werr, errNoConditionalWrites) {
			return werr
		}
		cur, body, curTag, rerr := l.s.readLaneHead(ctx, l.key, l.topic, l.partition)
		switch {
		case rerr != nil:
			l.addDoubt(b)
			return fmt.Errorf("lane %s: %s: outcome unknown: %w", l.url(), what, errors.Join(werr, rerr))
		case cur != nil && bytes.Equal(body, b):
			l.adopt(cur, body, curTag) // written; the reply was lost or the retry refused
			return nil
		case cur != nil && bytes.Equal(body, held):
			l.mu.Lock()
			l.etag = curTag // the same version (its ETag as the store gives it now)
			l.mu.Unlock()
			l.addDoubt(b)
			return fmt.Errorf("lane %s: %s not written (the HEAD is unchanged, owner epoch %d still this store's): %w", l.url(), what, head.Epoch, werr)
		case cur != nil && round == 0 && l.isDoubt(body):
			l.adopt(cur, body, curTag) // an earlier write of unknown outcome landed: write over it
			continue
		}
		return l.fence(cur)
	}
}

// Put implements recovery.Store: the HEAD's next version holds c (a
// copy), the lane's only record from now on. A nil error means c is
// decided: the HEAD holds it, and this store still owns the lane. A record
// with the id of the one held, or an older one, is refused (an error
// matching fs.ErrExist), unless it is the same record (nil, nothing
// written). A fenced store fails with ErrFenced; a released one, or one
// never acquired, fails. The hook point HookDecided follows the write.
func (l *LaneStore) Put(ctx context.Context, c *recovery.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("lane %s: nil checkpoint", l.url())
	}
	enc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("lane %s: encode checkpoint %d: %w", l.url(), c.ID, err)
	}
	err = l.update(ctx, fmt.Sprintf("checkpoint %d", c.ID), func(h *LaneHead) error {
		if h.Released {
			return fmt.Errorf("lane %s: checkpoint %d: released by this store", l.url(), c.ID)
		}
		if old := h.Checkpoint; old != nil && c.ID <= old.ID {
			if held, _ := json.Marshal(old); c.ID == old.ID && bytes.Equal(held, enc) {
				return errNoWrite
			}
			return fmt.Errorf("lane %s: checkpoint %d: the lane holds checkpoint %d: %w", l.url(), c.ID, old.ID, fs.ErrExist)
		}
		var cp recovery.Checkpoint
		if err := json.Unmarshal(enc, &cp); err != nil {
			return err
		}
		h.Checkpoint = &cp
		return nil
	})
	if errors.Is(err, errNoWrite) {
		return nil
	}
	if err != nil {
		return err
	}
	return l.callHook(HookDecided)
}

// Release hands the lane off: one more write of the HEAD (as Put's) with
// released set, and done set when done is (done is never cleared). A nil
// error means the HEAD says released; later Puts fail. A second Release
// with the same done writes nothing. A fenced store fails with ErrFenced.
func (l *LaneStore) Release(ctx context.Context, done bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := l.update(ctx, "release", func(h *LaneHead) error {
		if h.Released && (h.Done || !done) {
			return errNoWrite
		}
		h.Released = true
		h.Done = h.Done || done
		return nil
	})
	if errors.Is(err, errNoWrite) {
		return nil
	}
	return err
}

// List implements recovery.Store from the head held (no I/O): none when
// it holds no checkpoint, or the first one (id 0, no participants) that
// Acquire's init made; else the id of its checkpoint.
func (l *LaneStore) List(ctx context.Context) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.op.Lock()
	defer l.op.Unlock()
	h, err := l.current()
	if err != nil {
		return nil, err
	}
	c := h.Checkpoint
	if c == nil || (c.ID == 0 && len(c.Participants) == 0) {
		return nil, nil
	}
	return []uint64{c.ID}, nil
}

// Get implements recovery.Store from the head held (no I/O): a copy of its
// checkpoint if it has id id, else an error matching fs.ErrNotExist.
func (l *LaneStore) Get(ctx context.Context, id uint64) (*recovery.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.op.Lock()
	defer l.op.Unlock()
	h, err := l.current()
	if err != nil {
		return nil, err
	}
	if h.Checkpoint == nil || h.Checkpoint.ID != id {
		return nil, fmt.Errorf("lane %s: checkpoint %d: not the lane's record: %w", l.url(), id, fs.ErrNotExist)
	}
	return cloneCheckpoint(h.Checkpoint), nil
}

// Delete implements recovery.Store: a lane keeps only its newest record,
// so it does nothing (a fenced store fails with ErrFenced).
func (l *LaneStore) Delete(ctx context.Context, id uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.fencedErr()
}

// JobID implements recovery.Store: the job's (Store.JobID).
func (l *LaneStore) JobID(ctx context.Context) (string, error) {
	if err := l.fencedErr(); err != nil {
		return "", err
	}
	return l.s.JobID(ctx)
}

// SetJobID implements recovery.Store: the job's (Store.SetJobID).
func (l *LaneStore) SetJobID(ctx context.Context, id string) error {
	if err := l.fencedErr(); err != nil {
		return err
	}
	return l.s.SetJobID(ctx, id)
}

// JobIDLocation implements recovery.Store: the job's (Store.JobIDLocation).
func (l *LaneStore) JobIDLocation() string { return l.s.JobIDLocation() }

// JobRecords implements recovery.Store: the job's (Store.JobRecords).
func (l *LaneStore) JobRecords(ctx context.Context) ([]*recovery.JobRecord, error) {
	if err := l.fencedErr(); err != nil {
		return nil, err
	}
	return l.s.JobRecords(ctx)
}

// AddJobRecord implements recovery.Store: the job's (Store.AddJobRecord).
func (l *LaneStore) AddJobRecord(ctx context.Context, r *recovery.JobRecord) error {
	if err := l.fencedErr(); err != nil {
		return err
	}
	return l.s.AddJobRecord(ctx, r)
}

// ErrConditionsIgnored is what CheckConditionalWrites returns for a store
// that accepts conditional writes but does not apply their conditions.
var ErrConditionsIgnored = errors.New("the store ignores the conditions of conditional writes (If-None-Match, If-Match): group mode cannot fence a process that lost its partitions on it")

// conditionProbe is the object CheckConditionalWrites writes beside the
// checkpoint records (not a record's name, not under the lanes).
const conditionProbe = "CONDITION-PROBE"

// CheckConditionalWrites makes sure that the store applies conditional
// writes, which the lanes' fencing rests on: a PUT with If-None-Match: *
// of an existing object and a PUT with If-Match of an ETag it does not
// have must both be refused. It writes STATE/CONDITION-PROBE. A nil error
// means both were refused; a store that refuses the headers gives an
// error that says so, and one that ignores them ErrConditionsIgnored.
// Safe for concurrent use.
func (s *Store) CheckConditionalWrites(ctx context.Context) error {
	key := s.dir() + conditionProbe
	put := func(set func(*s3api.PutObjectInput)) error {
		b := []byte("conditional write probe\n")
		in := &s3api.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))),
			ServerSideEncryption: s.o.sseType(), SSEKMSKeyId: s.o.kmsKey()}
		set(in)
		_, err := s.client.PutObject(ctx, in, s.call())
		return err
	}
	absent := func(in *s3api.PutObjectInput) { in.IfNoneMatch = aws.String("*") }
	if err := put(absent); err != nil && !isPreconditionFailed(err) {
		if isNotImplemented(err) {
			return fmt.Errorf("state %s: %w", s.Location(), errNoConditionalWrites)
		}
		return fmt.Errorf("state %s: probe of conditional writes: %w", s.Location(), err)
	}
	checks := []struct {
		what string
		set  func(*s3api.PutObjectInput)
	}{
		{"If-None-Match: * of an existing object", absent},
		{"If-Match of another ETag", func(in *s3api.PutObjectInput) { in.IfMatch = aws.String(`"00000000000000000000000000000000"`) }},
	}
	for _, c := range checks {
		err := put(c.set)
		switch {
		case err == nil:
			return fmt.Errorf("state %s: a PUT with %s was applied: %w", s.Location(), c.what, ErrConditionsIgnored)
		case isNotImplemented(err):
			return fmt.Errorf("state %s: %w", s.Location(), errNoConditionalWrites)
		case !isConflict(err):
			return fmt.Errorf("state %s: probe of conditional writes: %w", s.Location(), err)
		}
	}
	return nil
}
