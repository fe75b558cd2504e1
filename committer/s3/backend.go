package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
)

// StagingDir is the hidden directory, under the backend's prefix, that holds
// the staging objects: upload markers and tail objects.
const StagingDir = "_filesink-staging"

const (
	markerSuffix = ".upload"
	tailInfix    = ".tail-"
	// metaID is the user-metadata key (x-amz-meta-filesink-id) holding the
	// random id of the Open that created an upload; it identifies a
	// published object as ours.
	metaID = "filesink-id"
	// maxKeyLen is S3's limit on object keys, in bytes.
	maxKeyLen = 1024
	// maxTailObjects bounds the tail objects of a resumable (see the tail
	// object policy in writer.go).
	maxTailObjects = maxMerged + maxDeltas
)

// Backend is a driver.Backend on one prefix of an
// S3 bucket: every in-progress part file is a multipart upload, published by
// CompleteMultipartUpload. Safe for concurrent use.
type Backend struct {
	client *s3api.Client
	bucket string
	prefix string // no leading or trailing '/'; may be empty
	o      options

	// noCondComplete is set once the store rejected If-None-Match on
	// CompleteMultipartUpload as not implemented; commits then HEAD first.
	noCondComplete atomic.Bool
	// noCondPut is the same for PutObject (markers).
	noCondPut atomic.Bool
	// hashSpill: the client talks plain HTTP, where SigV4 signs the
	// SHA-256 of every part; the writers compute it while spilling and
	// hand it to the SDK, which would otherwise read each part back from
	// the spill file once more to hash it.
	hashSpill bool
	// spills are the released spill files the writers reuse (at most
	// concurrency+1; unlinked files, closed by Close or, failing that, by
	// the garbage collector once the backend is unreachable).
	spills spillPool
}

var _ driver.Backend = (*Backend)(nil)

// New returns a backend publishing part files as objects
// s3://bucket/prefix/TARGET. prefix may be empty (the bucket's root); leading
// and trailing slashes are ignored. The options are validated together.
func New(client *s3api.Client, bucket, prefix string, opts ...Option) (*Backend, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt.apply(&o)
	}
	if client == nil {
		return nil, errors.New("s3: nil client")
	}
	if err := checkBucket(bucket); err != nil {
		return nil, err
	}
	p, err := cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Backend{client: client, bucket: bucket, prefix: p, o: o, hashSpill: plainHTTP(client),
		spills: spillPool{max: o.concurrency + 1}}, nil
}

// Close closes the spill files the backend keeps for reuse. Writers still
// open go on (the files they hold are closed when they release them), and
// nothing is kept afterwards. Nothing in the store is touched. Safe for
// concurrent use; later calls do nothing.
func (b *Backend) Close() error {
	b.spills.close()
	return nil
}

// plainHTTP reports whether client's endpoint is an http:// URL. With
// any other endpoint (AWS's own are HTTPS) UploadPart signs
// UNSIGNED-PAYLOAD over TLS and a precomputed hash would be wasted work.
func plainHTTP(client *s3api.Client) bool {
	ep := client.Options().BaseEndpoint
	return ep != nil && strings.HasPrefix(strings.ToLower(*ep), "http://")
}

func checkBucket(bucket string) error {
	if bucket == "" || len(bucket) > 255 || strings.ContainsAny(bucket, "/ \t\n") {
		return fmt.Errorf("s3: invalid bucket name %q", bucket)
	}
	return nil
}

func cleanPrefix(prefix string) (string, error) {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return "", nil
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return "", fmt.Errorf("s3: invalid prefix %q: empty, '.' or '..' component", prefix)
		}
	}
	return p, nil
}

// Bucket returns the bucket.
func (b *Backend) Bucket() string { return b.bucket }

// Prefix returns the prefix, without leading or trailing slashes.
func (b *Backend) Prefix() string { return b.prefix }

// Location returns "s3://bucket/prefix".
func (b *Backend) Location() string { return b.url("") }

// key returns the object key of rel, a path relative to the prefix.
func (b *Backend) key(rel string) string {
	if b.prefix == "" {
		return rel
	}
	if rel == "" {
		return b.prefix
	}
	return b.prefix + "/" + rel
}

// url names an object (rel relative to the prefix) for messages.
func (b *Backend) url(rel string) string {
	return "s3://" + b.bucket + "/" + b.key(rel)
}

func (b *Backend) objURL(key string) string { return "s3://" + b.bucket + "/" + key }

// StagingName returns the staging name of target, relative to the prefix:
// "_filesink-staging/DIR/.BASE". The upload marker of target is that name
// plus ".upload", its tail objects that name plus ".tail-" and 16 hex
// digits.
func StagingName(target string) string {
	dir, base := path.Split(target)
	return StagingDir + "/" + dir + "." + base
}

func (b *Backend) markerKey(target string) string { return b.key(StagingName(target)) + markerSuffix }

func (b *Backend) newTailKey(target string) string {
	return b.key(StagingName(target)) + tailInfix + randHex(8)
}

// parseStaging maps a key under the staging directory back to its target
// and kind ("marker" or "tail"); ok is false for other keys.
func (b *Backend) parseStaging(key string) (target, kind string, ok bool) {
	rel, found := strings.CutPrefix(key, b.key(StagingDir)+"/")
	if !found {
		return "", "", false
	}
	var name string
	switch {
	case strings.HasSuffix(rel, markerSuffix):
		name, kind = strings.TrimSuffix(rel, markerSuffix), "marker"
	default:
		i := strings.LastIndex(rel, tailInfix)
		if i < 0 || !isHex(rel[i+len(tailInfix):], 16) {
			return "", "", false
		}
		name, kind = rel[:i], "tail"
	}
	dir, base := path.Split(name)
	if len(base) < 2 || base[0] != '.' {
		return "", "", false
	}
	target = dir + base[1:]
	if checkTarget(target) != nil {
		return "", "", false
	}
	return target, kind, true
}

func checkTarget(target string) error {
	if target == "" || strings.ContainsAny(target, "\\\x00") || strings.HasPrefix(target, "/") {
		return fmt.Errorf("s3: invalid target %q", target)
	}
	for _, c := range strings.Split(target, "/") {
		if c == "" || c[0] == '.' || c[0] == '_' {
			return fmt.Errorf("s3: invalid target %q: component %q is empty or reserved", target, c)
		}
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// Record kinds.
const (
	kindResumable = "resumable"
	kindPending   = "pending"
)

// record is the resumable (from Persist) and the pending committable (from
// CloseForCommit).
type record struct {
	Kind     string    `json:"kind"`      // "resumable" or "pending"
	Target   string    `json:"target"`    // relative to the prefix
	Key      string    `json:"key"`       // object key of the target
	UploadID string    `json:"upload_id"` // the multipart upload
	ID       string    `json:"id"`        // random id of the Open, in the object's metadata
	Parts    []partRec `json:"parts"`     // uploaded parts, numbered from 1
	// BytesInParts is the sum of the parts' sizes.
	BytesInParts int64 `json:"bytes_in_parts"`
	// Tail lists the tail objects holding, in order, the bytes after the
	// parts (resumable only).
	Tail []tailRec `json:"tail,omitempty"`
	// TailLength is the sum of the tail objects' lengths.
	TailLength int64 `json:"tail_length,omitempty"`
	// Length is the part file's length: BytesInParts + TailLength.
	Length int64 `json:"length"`
	// Drop lists tail objects that the commit deletes once the file is
	// published (pending only): those of a resumable that Finalize
	// turned into this pending.
	Drop []string `json:"drop,omitempty"`
}

// tailRec is one tail object.
type tailRec struct {
	Key    string `json:"key"`
	Length int64  `json:"length"`
	CRC32  string `json:"crc32"`
}

type partRec struct {
	Number int32  `json:"number"`
	ETag   string `json:"etag"`
	Size   int64  `json:"size"`
	CRC32  string `json:"crc32,omitempty"` // base64 of the big-endian CRC-32 (IEEE)
}

// parse decodes and checks a record of kind want ("" for either).
func (b *Backend) parse(data json.RawMessage, want string) (record, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("s3: bad record %s: %w", data, err)
	}
	bad := func(why string) (record, error) {
		return r, fmt.Errorf("s3: bad record %s: %s", data, why)
	}
	if r.Kind != kindResumable && r.Kind != kindPending {
		return bad("unknown kind")
	}
	if want != "" && r.Kind != want {
		return bad(fmt.Sprintf("a %s, want a %s", r.Kind, want))
	}
	if err := checkTarget(r.Target); err != nil {
		return r, fmt.Errorf("s3: bad record %s: %w", data, err)
	}
	if r.Key != b.key(r.Target) {
		return bad(fmt.Sprintf("key %q is not the key of target %q under %s (a record of another prefix?)", r.Key, r.Target, b.Location()))
	}
	if r.UploadID == "" || !isHex(r.ID, 16) {
		return bad("missing upload id or id")
	}
	var sum int64
	for i, p := range r.Parts {
		want := int32(i + 1)
		if r.Kind == kindPending && i == len(r.Parts)-1 && p.Number == MaxParts {
			want = MaxParts // a finalized part's tail (Finalize)
		}
		if p.Number != want || p.ETag == "" || p.Size < 0 || p.Size > MaxPartSize {
			return bad(fmt.Sprintf("part %d", i+1))
		}
		sum += p.Size
	}
	if sum != r.BytesInParts || r.TailLength < 0 || r.Length != sum+r.TailLength {
		return bad("lengths do not add up")
	}
	var tail int64
	for _, tr := range r.Tail {
		if t, kind, ok := b.parseStaging(tr.Key); !ok || kind != "tail" || t != r.Target || tr.Length <= 0 {
			return bad("a tail entry is not a tail object of the target")
		}
		if _, ok := crcOf(tr.CRC32); !ok {
			return bad("a tail entry has no CRC-32")
		}
		tail += tr.Length
	}
	if tail != r.TailLength || len(r.Tail) > maxTailObjects {
		return bad("tail lengths do not add up")
	}
	if r.Kind == kindPending && (len(r.Parts) == 0 || len(r.Tail) != 0) {
		return bad("a pending needs parts and no tail")
	}
	for _, k := range r.Drop {
		if t, kind, ok := b.parseStaging(k); !ok || kind != "tail" || t != r.Target || r.Kind != kindPending {
			return bad("a drop entry is not a tail object of the target")
		}
	}
	return r, nil
}

// SweepEvery implements driver.Backend: every SweepEvery checkpoints.
func (b *Backend) SweepEvery() int { return SweepEvery }

// SweepEvery is how often (in checkpoints) an S3 output's orphaned staging
// is swept while a job runs: the tail object a checkpoint writes for an
// open part is orphaned once a later checkpoint writes the next one, and
// would otherwise wait for the next recovery.
const SweepEvery = 10

// Describe implements driver.Backend: the staging name is StagingName of
// the target, the same for the resumables and the pending of one part file.
func (b *Backend) Describe(data json.RawMessage) (target, staging string, err error) {
	r, err := b.parse(data, "")
	if err != nil {
		return "", "", err
	}
	return r.Target, StagingName(r.Target), nil
}

// call returns the per-request SDK options.
func (b *Backend) call() func(*s3api.Options) { return b.o.apply }

// marker is the content of an upload marker.
type marker struct {
	Target  string    `json:"target"`
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

// Open implements driver.Backend. It checks that the target does not
// exist (HEAD) while it claims the target by writing its upload marker
// with If-None-Match: * (so a second Open of the same target fails, in
// this process or another), then creates the multipart upload. Three
// requests, two round trips.
func (b *Backend) Open(ctx context.Context, target string) (driver.PartWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTarget(target); err != nil {
		return nil, err
	}
	key := b.key(target)
	if n := len(b.key(StagingName(target))) + len(tailInfix) + 16; n > maxKeyLen {
		return nil, fmt.Errorf("s3: open %s: its staging keys would have %d bytes, S3 allows %d", b.url(target), n, maxKeyLen)
	}
	// The HEAD and the marker's write run at once (one round trip less
	// for every part file, which a roll waits for); a marker written for
	// a target that turns out to exist is deleted again.
	id := randHex(8)
	headErr := make(chan error, 1)
	go func() {
		_, err := b.client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &b.bucket, Key: &key}, b.call())
		headErr <- err
	}()
	merr := b.putMarker(ctx, target, id)
	err := <-headErr
	if err == nil || !isNotFound(err) {
		if merr == nil {
			mkey := b.markerKey(target)
			if _, derr := b.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &b.bucket, Key: &mkey}, b.call()); derr != nil {
				b.o.log.Debug("s3: delete the upload marker of a part file not opened (left to the sweep)", "key", mkey, "err", derr)
			}
		}
		if err == nil {
			return nil, alreadyExists("s3: open %s", b.url(target))
		}
		return nil, fmt.Errorf("s3: open %s: %w", b.url(target), err)
	}
	if merr != nil {
		return nil, merr
	}
	in := &s3api.CreateMultipartUploadInput{
		Bucket: &b.bucket, Key: &key,
		Metadata:             map[string]string{metaID: id},
		ContentType:          aws.String(ContentTypeFor(target)),
		ServerSideEncryption: b.o.sseType(),
		SSEKMSKeyId:          b.o.kmsKey(),
		StorageClass:         b.o.storage,
		Tagging:              b.o.tagging(),
	}
	if b.o.contentType != nil {
		in.ContentType = b.o.contentType
	}
	if b.o.contentEnc != nil && *b.o.contentEnc != "" {
		in.ContentEncoding = b.o.contentEnc
	}
	if b.o.checksums {
		in.ChecksumAlgorithm = s3types.ChecksumAlgorithmCrc32
	}
	out, err := b.client.CreateMultipartUpload(ctx, in, b.call())
	if err != nil {
		// The marker stays: an attempt whose reply was lost may have created
		// an upload, which the sweep finds through the marker.
		return nil, fmt.Errorf("s3: open %s: create multipart upload: %w", b.url(target), err)
	}
	if out.UploadId == nil || *out.UploadId == "" {
		return nil, fmt.Errorf("s3: open %s: the store returned no upload id", b.url(target))
	}
	b.o.log.Debug("s3: upload created", "key", key, "upload_id", *out.UploadId)
	return newWriter(b, record{Kind: kindResumable, Target: target, Key: key, UploadID: *out.UploadId, ID: id}), nil
}

// Rebuild implements driver.Backend: it aborts every incomplete upload of
// lost's key (lost's own, if it is still there, and those of rebuilds
// that a crash stopped before their commit), deletes lost's tail objects
// and the upload marker, and opens the target again.
func (b *Backend) Rebuild(ctx context.Context, lost json.RawMessage) (driver.PartWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(lost, &k); err != nil {
		return nil, fmt.Errorf("s3: bad record %s: %w", lost, err)
	}
	r, err := b.parse(lost, k.Kind)
	if err != nil {
		return nil, err
	}
	p := s3api.NewListMultipartUploadsPaginator(b.client, &s3api.ListMultipartUploadsInput{Bucket: &b.bucket, Prefix: &r.Key})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx, b.call())
		if err != nil {
			return nil, fmt.Errorf("s3: rebuild %s: list its uploads: %w", b.objURL(r.Key), err)
		}
		for _, u := range page.Uploads {
			if aws.ToString(u.Key) != r.Key {
				continue
			}
			_, err := b.client.AbortMultipartUpload(ctx, &s3api.AbortMultipartUploadInput{Bucket: &b.bucket, Key: u.Key, UploadId: u.UploadId}, b.call())
			if err != nil && !isNoSuchUpload(err) {
				return nil, fmt.Errorf("s3: rebuild %s: abort upload %s: %w", b.objURL(r.Key), aws.ToString(u.UploadId), err)
			}
		}
	}
	// The lost record's tail objects (a resumable's), and the marker.
	keys := []string{b.markerKey(r.Target)}
	for _, t := range r.Tail {
		keys = append(keys, t.Key)
	}
	for _, k := range keys {
		if _, err := b.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &b.bucket, Key: &k}, b.call()); err != nil {
			return nil, fmt.Errorf("s3: rebuild %s: delete its staging object %s: %w", b.objURL(r.Key), b.objURL(k), err)
		}
	}
	return b.Open(ctx, r.Target)
}

// putMarker writes the upload marker of target, failing with
// ErrAlreadyExists if another Open wrote it.
func (b *Backend) putMarker(ctx context.Context, target, id string) error {
	mkey := b.markerKey(target)
	body, _ := json.Marshal(marker{Target: target, ID: id, Created: time.Now().UTC()})
	var found error // the verdict on an existing marker, returned as is
	err := b.putOnce(ctx, mkey, body, func() error {
		// Ours, if an attempt whose reply was lost wrote it.
		got, gerr := b.getSmall(ctx, mkey)
		var m marker
		if gerr != nil || json.Unmarshal(got, &m) != nil || m.ID != id {
			found = alreadyExists("s3: open %s: staging data exists (upload marker %s: an upload of this part file is in progress or orphaned; "+
				"`filesink uploads list` shows it and the recovery sweep removes orphans)", b.url(target), b.objURL(mkey))
		}
		return found
	})
	if err != nil && err != found {
		return fmt.Errorf("s3: open %s: write upload marker: %w", b.url(target), err)
	}
	return err
}

// putOnce writes data as key unless key exists: a PutObject with
// If-None-Match: * (on a store that does not implement it, a HEAD first;
// two writers could then both write, which the callers never do). When
// key exists, exists decides the result. Other errors are the SDK's.
func (b *Backend) putOnce(ctx context.Context, key string, data []byte, exists func() error) error {
	put := func(cond bool) error {
		in := &s3api.PutObjectInput{
			Bucket: &b.bucket, Key: &key, Body: bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/json"),
			ServerSideEncryption: b.o.sseType(), SSEKMSKeyId: b.o.kmsKey(),
		}
		if cond {
			in.IfNoneMatch = aws.String("*")
		}
		if b.o.checksums {
			in.ChecksumCRC32 = crcBase64(crc32.ChecksumIEEE(data))
		}
		_, err := b.client.PutObject(ctx, in, b.call())
		return err
	}
	if b.noCondPut.Load() {
		_, err := b.client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &b.bucket, Key: &key}, b.call())
		if err == nil {
			return exists()
		}
		if !isNotFound(err) {
			return err
		}
		return put(false)
	}
	switch err := put(true); {
	case err == nil:
		return nil
	case isNotImplemented(err):
		b.noCondPut.Store(true)
		b.o.log.Warn("s3: the store does not support If-None-Match on PutObject; checking with HEAD first", "bucket", b.bucket)
		return b.putOnce(ctx, key, data, exists)
	case isPreconditionFailed(err):
		return exists()
	default:
		return err
	}
}

// getSmall reads a small object whole.
func (b *Backend) getSmall(ctx context.Context, key string) ([]byte, error) {
	out, err := b.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &b.bucket, Key: &key}, b.call())
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(io.LimitReader(out.Body, 1<<20))
}

// listParts returns the parts of an upload by number (paginated).
func (b *Backend) listParts(ctx context.Context, key, uploadID string) (map[int32]s3types.Part, error) {
	parts := map[int32]s3types.Part{}
	p := s3api.NewListPartsPaginator(b.client, &s3api.ListPartsInput{Bucket: &b.bucket, Key: &key, UploadId: &uploadID})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx, b.call())
		if err != nil {
			return nil, err
		}
		for _, part := range out.Parts {
			if part.PartNumber != nil {
				parts[*part.PartNumber] = part
			}
		}
	}
	return parts, nil
}

// checkParts compares the recorded parts with the listed ones; it returns
// a description of the first difference, or "".
func checkParts(recorded []partRec, listed map[int32]s3types.Part) string {
	for _, rp := range recorded {
		lp, ok := listed[rp.Number]
		switch {
		case !ok:
			return fmt.Sprintf("part %d is missing", rp.Number)
		case unquote(aws.ToString(lp.ETag)) != unquote(rp.ETag):
			return fmt.Sprintf("part %d has ETag %s, the checkpoint recorded %s", rp.Number, aws.ToString(lp.ETag), rp.ETag)
		case lp.Size != nil && *lp.Size != rp.Size:
			return fmt.Sprintf("part %d has %d bytes, the checkpoint recorded %d", rp.Number, *lp.Size, rp.Size)
		}
	}
	return ""
}

func unquote(etag string) string { return strings.Trim(etag, "\"") }

// Resume implements driver.Backend: the upload must exist with every
// recorded part (ListParts), and the tail object must hold the recorded
// bytes; it is read back into a new spill file and never deleted (a second
// restore from the same checkpoint needs it again). Parts numbered above the
// recorded ones are overwritten by the resumed writer and never completed.
func (b *Backend) Resume(ctx context.Context, resumable json.RawMessage) (driver.PartWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := b.parse(resumable, kindResumable)
	if err != nil {
		return nil, err
	}
	listed, err := b.listParts(ctx, r.Key, r.UploadID)
	if isNoSuchUpload(err) {
		return nil, &UploadGoneError{Bucket: b.bucket, Key: r.Key, UploadID: r.UploadID}
	}
	if err != nil {
		return nil, fmt.Errorf("s3: resume %s: list parts of upload %s: %w", b.objURL(r.Key), r.UploadID, err)
	}
	if d := checkParts(r.Parts, listed); d != "" {
		return nil, dataLoss("s3: resume %s: upload %s no longer holds the recorded data: %s", b.objURL(r.Key), r.UploadID, d)
	}
	w := newWriter(b, r)
	w.recorded.Store(true)
	if len(r.Tail) > 0 {
		if err := w.loadTail(ctx, r); err != nil {
			w.Close()
			return nil, err
		}
	}
	b.o.log.Debug("s3: upload resumed", "key", r.Key, "upload_id", r.UploadID, "parts", len(r.Parts), "length", r.Length)
	return w, nil
}

// Commit implements driver.Backend: CompleteMultipartUpload of exactly
// the recorded parts with If-None-Match: *. See the package documentation
// for how an upload that is gone or a target that exists is resolved.
func (b *Backend) Commit(ctx context.Context, pending json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := b.parse(pending, kindPending)
	if err != nil {
		return committer.Permanent(err)
	}
	loc := b.objURL(r.Key)
	if b.noCondComplete.Load() {
		return b.commitUnconditional(ctx, r)
	}
	err = b.complete(ctx, r, true)
	switch {
	case err == nil:
		b.afterCommit(ctx, r)
		return nil
	case isNoSuchUpload(err):
		return b.verifyCommitted(ctx, r)
	case isPreconditionFailed(err):
		// An object has the name: ours (an earlier attempt completed the
		// upload and its reply was lost) or somebody else's.
		exists, uerr := b.uploadExists(ctx, r)
		if uerr != nil {
			return fmt.Errorf("s3: commit %s: %w", loc, uerr)
		}
		if !exists {
			return b.verifyCommitted(ctx, r)
		}
		return alreadyExists("s3: commit %s: a different object already has that name; nothing was overwritten and upload %s is kept "+
			"(remove or rename that object and run again to publish this part file)", loc, r.UploadID)
	case isNotImplemented(err):
		b.noCondComplete.Store(true)
		b.o.log.Warn("s3: the store does not support If-None-Match on CompleteMultipartUpload; checking with HEAD first", "bucket", b.bucket)
		return b.commitUnconditional(ctx, r)
	case apiCode(err) == "InvalidPart":
		return b.explainInvalidPart(ctx, r, err)
	}
	return fmt.Errorf("s3: commit %s: complete upload %s: %w", loc, r.UploadID, err)
}

// commitUnconditional publishes on a store without conditional writes: HEAD,
// then complete. Another writer creating the object between the two is not
// detected.
func (b *Backend) commitUnconditional(ctx context.Context, r record) error {
	loc := b.objURL(r.Key)
	_, err := b.client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &b.bucket, Key: &r.Key}, b.call())
	switch {
	case err == nil:
		exists, uerr := b.uploadExists(ctx, r)
		if uerr != nil {
			return fmt.Errorf("s3: commit %s: %w", loc, uerr)
		}
		if !exists {
			return b.verifyCommitted(ctx, r)
		}
		return alreadyExists("s3: commit %s: a different object already has that name; nothing was overwritten and upload %s is kept", loc, r.UploadID)
	case !isNotFound(err):
		return fmt.Errorf("s3: commit %s: %w", loc, err)
	}
	err = b.complete(ctx, r, false)
	switch {
	case err == nil:
		b.afterCommit(ctx, r)
		return nil
	case isNoSuchUpload(err):
		return b.verifyCommitted(ctx, r)
	case apiCode(err) == "InvalidPart":
		return b.explainInvalidPart(ctx, r, err)
	}
	return fmt.Errorf("s3: commit %s: complete upload %s: %w", loc, r.UploadID, err)
}

func (b *Backend) complete(ctx context.Context, r record, conditional bool) error {
	parts := make([]s3types.CompletedPart, len(r.Parts))
	for i, p := range r.Parts {
		parts[i] = s3types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
		if p.CRC32 != "" {
			parts[i].ChecksumCRC32 = aws.String(p.CRC32)
		}
	}
	in := &s3api.CompleteMultipartUploadInput{
		Bucket: &b.bucket, Key: &r.Key, UploadId: &r.UploadID,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
	}
	if conditional {
		in.IfNoneMatch = aws.String("*")
	}
	// A Complete cut short by the client (a cancelled context, a second
	// signal) can leave some stores with an upload whose parts are gone
	// (seen with MinIO): once sent, let it finish, within a bound.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completeTimeout)
	defer cancel()
	_, err := b.client.CompleteMultipartUpload(cctx, in, b.call())
	return err
}

// completeTimeout bounds a CompleteMultipartUpload that its caller no longer
// waits for.
const completeTimeout = 10 * time.Minute

// afterCommit deletes the upload marker, which only the sweep needs to find
// uploads, unless another upload of the key exists (one created by an
// attempt whose reply was lost): the sweep aborts that one later. A failure
// leaves the marker to the sweep.
func (b *Backend) afterCommit(ctx context.Context, r record) {
	if len(r.Drop) > 0 {
		if err := b.deleteKeys(ctx, r.Drop); err != nil {
			b.o.log.Debug("s3: delete the tail objects of a finalized part (left to the sweep)", "key", r.Key, "err", err)
		}
	}
	mkey := b.markerKey(r.Target)
	ups, err := b.uploadsOf(ctx, r.Key)
	if err != nil || len(ups) > 0 {
		b.o.log.Debug("s3: upload marker kept after commit (left to the sweep)", "key", mkey, "uploads", len(ups), "err", err)
		return
	}
	if _, err := b.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &b.bucket, Key: &mkey}, b.call()); err != nil {
		b.o.log.Debug("s3: delete upload marker after commit (left to the sweep)", "key", mkey, "err", err)
	}
}

func (b *Backend) uploadExists(ctx context.Context, r record) (bool, error) {
	_, err := b.client.ListParts(ctx, &s3api.ListPartsInput{Bucket: &b.bucket, Key: &r.Key, UploadId: &r.UploadID, MaxParts: aws.Int32(1)}, b.call())
	switch {
	case err == nil:
		return true, nil
	case isNoSuchUpload(err):
		return false, nil
	}
	return false, fmt.Errorf("list parts of upload %s: %w", r.UploadID, err)
}

// explainInvalidPart turns InvalidPart (a recorded part is missing or
// differs) into ErrDataLoss naming the part, or returns err.
func (b *Backend) explainInvalidPart(ctx context.Context, r record, err error) error {
	listed, lerr := b.listParts(ctx, r.Key, r.UploadID)
	if isNoSuchUpload(lerr) {
		return b.verifyCommitted(ctx, r)
	}
	if lerr == nil {
		if d := checkParts(r.Parts, listed); d != "" {
			return dataLoss("s3: commit %s: upload %s no longer holds the recorded data (%s); nothing was published", b.objURL(r.Key), r.UploadID, d)
		}
	}
	return fmt.Errorf("s3: commit %s: complete upload %s: %w", b.objURL(r.Key), r.UploadID, err)
}

// verifyCommitted is the verified re-commit: the upload is gone, so the
// object must exist exactly as recorded.
func (b *Backend) verifyCommitted(ctx context.Context, r record) error {
	diff, err := b.compare(ctx, r)
	if err != nil {
		return err
	}
	if diff != "" {
		return dataLoss("s3: commit %s: upload %s is gone and the object there does not match the checkpoint (%s); the part file was not published as recorded", b.objURL(r.Key), r.UploadID, diff)
	}
	b.afterCommit(ctx, r)
	return nil
}

// compare HEADs the target of r and returns "" when it is the object r
// describes, else the first difference. A missing object is an
// *UploadGoneError when the upload is gone too.
func (b *Backend) compare(ctx context.Context, r record) (string, error) {
	in := &s3api.HeadObjectInput{Bucket: &b.bucket, Key: &r.Key}
	if b.o.checksums {
		in.ChecksumMode = s3types.ChecksumModeEnabled
	}
	h, err := b.client.HeadObject(ctx, in, b.call())
	if isNotFound(err) {
		return "", &UploadGoneError{Bucket: b.bucket, Key: r.Key, UploadID: r.UploadID, Committing: true}
	}
	if err != nil {
		return "", fmt.Errorf("s3: commit %s: %w", b.objURL(r.Key), err)
	}
	if n := aws.ToInt64(h.ContentLength); n != r.Length {
		return fmt.Sprintf("it has %d bytes, the checkpoint recorded %d", n, r.Length), nil
	}
	id, hasID := h.Metadata[metaID]
	if hasID && id != r.ID {
		return fmt.Sprintf("it was written by upload id %s, the checkpoint recorded %s", id, r.ID), nil
	}
	verified := hasID
	if want, ok := multipartETag(r.Parts); ok && b.o.sse != EncryptionKMS {
		got := unquote(aws.ToString(h.ETag))
		if got != want {
			return fmt.Sprintf("its ETag is %s, the recorded parts give %s", got, want), nil
		}
		verified = true
	}
	if want, ok := compositeCRC32(r.Parts); ok && h.ChecksumCRC32 != nil && strings.Contains(*h.ChecksumCRC32, "-") {
		if *h.ChecksumCRC32 != want {
			return fmt.Sprintf("its CRC-32 is %s, the recorded parts give %s", *h.ChecksumCRC32, want), nil
		}
		verified = true
	}
	if !verified {
		return "it has no id, ETag or checksum to compare (only its length matches)", nil
	}
	return "", nil
}

// multipartETag returns the ETag S3 gives an object completed from parts
// (without quotes): the hex MD5 of the concatenated binary MD5s of the parts,
// "-", the number of parts. ok is false when a part ETag is not an MD5 (as
// with SSE-KMS or SSE-C).
func multipartETag(parts []partRec) (string, bool) {
	h := md5.New()
	for _, p := range parts {
		sum, err := hex.DecodeString(unquote(p.ETag))
		if err != nil || len(sum) != md5.Size {
			return "", false
		}
		h.Write(sum)
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(parts)), len(parts) > 0
}

// compositeCRC32 returns the COMPOSITE CRC-32 checksum of an object
// completed from parts: base64 of the CRC-32 of the concatenated part
// CRC-32s, "-", the number of parts.
func compositeCRC32(parts []partRec) (string, bool) {
	buf := make([]byte, 0, 4*len(parts))
	for _, p := range parts {
		c, err := base64.StdEncoding.DecodeString(p.CRC32)
		if err != nil || len(c) != 4 {
			return "", false
		}
		buf = append(buf, c...)
	}
	return *crcBase64(crc32.ChecksumIEEE(buf)) + "-" + strconv.Itoa(len(parts)), len(parts) > 0
}

// crcOf decodes a base64 CRC-32.
func crcOf(s string) (uint32, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

func crcBase64(c uint32) *string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], c)
	return aws.String(base64.StdEncoding.EncodeToString(b[:]))
}

// Check implements driver.Output: nil when the upload of pending is gone
// and its object exists exactly as recorded (length, id, ETag or checksum).
func (b *Backend) Check(ctx context.Context, pending json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := b.parse(pending, kindPending)
	if err != nil {
		return err
	}
	exists, err := b.uploadExists(ctx, r)
	if err != nil {
		return fmt.Errorf("%s: %w", b.objURL(r.Key), err)
	}
	if exists {
		return committer.NotCommitted("%s: not yet committed (multipart upload %s in progress; run filesink run again to finish the commit)", b.objURL(r.Key), r.UploadID)
	}
	diff, err := b.compare(ctx, r)
	var gone *UploadGoneError
	if errors.As(err, &gone) {
		return fmt.Errorf("%s: committed object missing (and upload %s gone)", b.objURL(r.Key), r.UploadID)
	}
	if err != nil {
		return err
	}
	if diff != "" {
		return fmt.Errorf("%s: %s", b.objURL(r.Key), diff)
	}
	return nil
}

// Finalize implements driver.Backend for a part that a process that lost
// it may still be writing: the pending completes the upload with exactly
// the recorded parts and, when the resumable has tail bytes, those bytes
// uploaded as part MaxParts (10,000). A writer uses part numbers below
// its limit only (WithMaxParts, at most MaxParts-1 for a part file that
// another process may finalize: group mode), so the other process's
// later parts are never completed and its tail objects are only read.
// Uploading the same tail again gives the same part; once the upload was
// completed, the pending is made from the recorded figures and the tail
// objects (their MD5 is the part's ETag) for Commit to verify.
func (b *Backend) Finalize(ctx context.Context, resumable json.RawMessage) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := b.parse(resumable, kindResumable)
	if err != nil {
		return nil, err
	}
	listed, err := b.listParts(ctx, r.Key, r.UploadID)
	gone := isNoSuchUpload(err)
	switch {
	case gone:
	case err != nil:
		return nil, fmt.Errorf("s3: finalize %s: list parts of upload %s: %w", b.objURL(r.Key), r.UploadID, err)
	default:
		if d := checkParts(r.Parts, listed); d != "" {
			return nil, dataLoss("s3: finalize %s: upload %s no longer holds the recorded data: %s", b.objURL(r.Key), r.UploadID, d)
		}
	}
	p := r
	p.Kind = kindPending
	p.Tail, p.TailLength = nil, 0
	p.BytesInParts = r.Length
	for _, t := range r.Tail {
		p.Drop = append(p.Drop, t.Key)
	}
	if r.TailLength == 0 && len(r.Parts) > 0 {
		return json.Marshal(p)
	}
	w := newWriter(b, r)
	defer w.Close()
	if r.TailLength > 0 {
		if err := w.loadTail(ctx, r); err != nil {
			return nil, err
		}
	}
	var last partRec
	if gone {
		// Completed by an earlier finalize's commit (or lost: Commit
		// tells): the part as it was uploaded.
		if last, err = w.spillPart(MaxParts); err != nil {
			return nil, err
		}
	} else if last, err = w.uploadPart(MaxParts, w.spill); err != nil {
		return nil, err
	}
	p.Parts = append(slices.Clone(r.Parts), last)
	return json.Marshal(p)
}

// spillPart returns the record of part number holding the bytes of the
// spill file (none: an empty part) as the store keeps it: its ETag is the
// MD5 of the bytes.
func (w *writer) spillPart(number int32) (partRec, error) {
	h := md5.New()
	p := partRec{Number: number}
	var crc uint32
	if w.spill != nil {
		if _, err := io.Copy(h, w.spill.reader()); err != nil {
			return p, fmt.Errorf("s3: finalize %s: read the tail: %w", w.where(), err)
		}
		p.Size, crc = w.spill.n, w.spill.crc
	}
	p.ETag = `"` + hex.EncodeToString(h.Sum(nil)) + `"`
	if w.b.o.checksums {
		p.CRC32 = *crcBase64(crc)
	}
	return p, nil
}
