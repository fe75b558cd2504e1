package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/filesink/filesink/committer/driver"
)

// writer is one multipart upload: a driver.PartWriter. Not safe for concurrent
// use, except that the function PersistAsync returns may run beside the
// other methods; its part uploads and tail puts run on their own
// goroutines.
type writer struct {
	b   *Backend
	rec record // target, key, upload id, id; parts and tail as last persisted

	ctx     context.Context // of the part uploads; canceled by Close
	cancel  context.CancelFunc
	sem     chan struct{} // one token per part upload in flight
	backlog chan struct{} // one token per part started by Write and not finished
	running sync.WaitGroup

	mu       sync.Mutex
	results  map[int32]partRec // finished parts (and resumed ones), by number
	have     int32             // parts 1..have are all in results
	changed  chan struct{}     // closed (and replaced) when results or asyncErr change
	asyncErr error             // first failed part upload

	next    int32 // number of the part being filled
	inParts int64 // bytes in parts started (finished or in flight)

	spill  *spillFile // bytes of the part being filled; nil when none
	size   int64      // bytes written, including resumed ones
	err    error      // sticky: the writer is broken
	closed bool
	// tail lists the tail objects that hold, in order, the first tailBytes
	// bytes of the spill file; the first merged of them each hold the bytes
	// of several persists, the others one persist's bytes (deltas). The
	// last entry's CRC is filled in when op, its put, is resolved.
	tail      []tailRec
	tailBytes int64
	merged    int
	op        *tailOp
	// deltaLimit is how many deltas are merged into one object at the next
	// persist; drawn anew after each merge, so that the writers of a sink
	// do not all rewrite their tails at the same checkpoint.
	deltaLimit int
	rnd        *rand.Rand
	// recorded: a checkpoint may hold this upload (it was resumed, or a
	// persist returned its resumable); for the message of an upload gone.
	recorded atomic.Bool
}

// Tail object policy: a persist stores the bytes written since the last one
// as a new object (a delta); once a part has deltaLimit deltas, the next
// persist merges them with its own bytes into one object; once it has
// maxMerged merged objects, the next merge rewrites the whole tail as one.
// So a resumable lists at most maxMerged+maxDeltas objects, and a byte is
// re-sent about once on average.
const (
	minDeltas = 8
	maxDeltas = 16
	maxMerged = 8
)

var _ driver.PartWriter = (*writer)(nil)

func newWriter(b *Backend, r record) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	seed := crc32.ChecksumIEEE([]byte(r.ID + r.Key))
	w := &writer{
		b: b, rec: r, ctx: ctx, cancel: cancel,
		sem:     make(chan struct{}, b.o.concurrency),
		backlog: make(chan struct{}, b.o.concurrency),
		results: make(map[int32]partRec, len(r.Parts)),
		changed: make(chan struct{}),
		next:    int32(len(r.Parts)) + 1,
		have:    int32(len(r.Parts)),
		inParts: r.BytesInParts,
		size:    r.Length,
		rnd:     rand.New(rand.NewPCG(uint64(seed), 0x66696c6573696e6b)),
	}
	for _, p := range r.Parts {
		w.results[p.Number] = p
	}
	w.deltaLimit = w.drawDeltaLimit()
	return w
}

func (w *writer) drawDeltaLimit() int { return minDeltas + w.rnd.IntN(maxDeltas-minDeltas+1) }

// spillFile holds the bytes of one part on local disk, with their CRC-32
// and, when the backend signs payloads (see Backend.hashSpill), their
// SHA-256. It is shared by the writer, the part upload and tail puts that
// read it, and goes back to its writer's pool when the last of them
// releases it.
type spillFile struct {
	f    *os.File
	name string // non-empty while the file must still be removed by name
	pool *spillPool
	n    int64
	crc  uint32
	sha  hash.Hash // nil unless the payload hash is precomputed
	refs atomic.Int32
}

// spillPool keeps released spill files for the next parts of a backend's
// writers (a writer that follows a roll, or another bucket's, takes the
// files of one that closed).
// Overwriting a file in place reuses its page-cache pages, where a new file
// allocates them and closing an unlinked one frees them again (measured:
// together about as much CPU as the write itself). At most max files are
// kept; the rest, and every file once the pool is closed, are closed. A
// file holds stale bytes past the new part's length; nothing reads them.
// Safe for concurrent use.
type spillPool struct {
	mu     sync.Mutex
	files  []*os.File
	max    int
	closed bool
}

func (p *spillPool) get() *os.File {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.files) == 0 {
		return nil
	}
	f := p.files[len(p.files)-1]
	p.files = p.files[:len(p.files)-1]
	return f
}

func (p *spillPool) put(f *os.File) {
	p.mu.Lock()
	keep := !p.closed && len(p.files) < p.max
	if keep {
		p.files = append(p.files, f)
	}
	p.mu.Unlock()
	if !keep {
		f.Close()
	}
}

// kept returns the number of files kept.
func (p *spillPool) kept() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.files)
}

// close closes the files kept and every file put later.
func (p *spillPool) close() {
	p.mu.Lock()
	files := p.files
	p.files, p.closed = nil, true
	p.mu.Unlock()
	for _, f := range files {
		f.Close()
	}
}

// newSpill returns an empty spill file, one of the backend's kept ones if
// it has one.
func (b *Backend) newSpill() (*spillFile, error) {
	pool := &b.spills
	s := &spillFile{pool: pool}
	if b.hashSpill {
		s.sha = sha256.New()
	}
	s.refs.Store(1)
	if s.f = pool.get(); s.f != nil {
		return s, nil
	}
	f, err := os.CreateTemp(b.o.spillDir, "filesink-s3-*.part")
	if err != nil {
		return nil, fmt.Errorf("s3: spill file: %w", err)
	}
	s.f, s.name = f, f.Name()
	// Unlinked at once where the OS allows it: the bytes live as long as
	// the descriptor, and a crash leaves nothing behind. A file that must
	// be removed by name is not reused.
	if os.Remove(f.Name()) == nil {
		s.name = ""
	} else {
		s.pool = nil
	}
	return s, nil
}

// write appends p; it writes at the file offset s.n, so that a reused file
// is overwritten from its start.
func (s *spillFile) write(p []byte) error {
	n, err := s.f.WriteAt(p, s.n)
	s.crc = crc32.Update(s.crc, crc32.IEEETable, p[:n])
	if s.sha != nil {
		s.sha.Write(p[:n])
	}
	s.n += int64(n)
	return err
}

func (s *spillFile) reader() io.ReadSeeker { return io.NewSectionReader(s.f, 0, s.n) }

// payloadHash is the hex SHA-256 of the file's bytes, or "" when it was
// not computed.
func (s *spillFile) payloadHash() string {
	if s.sha == nil {
		return ""
	}
	return hex.EncodeToString(s.sha.Sum(nil))
}

func (s *spillFile) retain() { s.refs.Add(1) }

func (s *spillFile) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	if s.pool != nil {
		s.pool.put(s.f)
		return
	}
	s.f.Close()
	if s.name != "" {
		os.Remove(s.name)
	}
}

func (w *writer) where() string { return w.b.objURL(w.rec.Key) }

func (w *writer) usable() error {
	if w.closed {
		return fmt.Errorf("s3: %s: writer is closed", w.where())
	}
	if w.err != nil {
		return w.err
	}
	w.mu.Lock()
	err := w.asyncErr
	w.mu.Unlock()
	if err != nil {
		w.err = err
	}
	return err
}

// room is how many more bytes the part being filled takes.
func (w *writer) room() int64 {
	var n int64
	if w.spill != nil {
		n = w.spill.n
	}
	if int(w.next) >= w.b.o.maxParts {
		// The last part the upload may have grows past the part size,
		// up to S3's part limit: the file sink rolls it at once (MustRoll).
		return MaxPartSize - n
	}
	return w.b.o.partSize - n
}

// Write implements driver.PartWriter: bytes go to the spill file; every
// full part is uploaded in the background. It blocks while the writer's
// limit of part uploads is in flight.
func (w *writer) Write(p []byte) (int, error) {
	if err := w.usable(); err != nil {
		return 0, err
	}
	written := 0
	for len(p) > 0 {
		room := w.room()
		if room <= 0 {
			w.err = fmt.Errorf("s3: write %s: the part file reached S3's limit of %d parts and %d bytes per part", w.where(), w.b.o.maxParts, int64(MaxPartSize))
			return written, w.err
		}
		if w.spill == nil {
			s, err := w.b.newSpill()
			if err != nil {
				w.err = err
				return written, err
			}
			w.spill = s
		}
		n := int(min(int64(len(p)), room))
		if err := w.spill.write(p[:n]); err != nil {
			w.err = fmt.Errorf("s3: write %s: spill file: %w", w.where(), err)
			return written, w.err
		}
		written += n
		w.size += int64(n)
		p = p[n:]
		if w.spill.n == w.b.o.partSize && int(w.next) < w.b.o.maxParts {
			if err := w.startPart(true); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// Size implements driver.PartWriter.
func (w *writer) Size() int64 { return w.size }

// MustRoll implements driver.PartWriter: true once the part being filled is
// the last one the upload may have.
func (w *writer) MustRoll() bool { return int(w.next) >= w.b.o.maxParts }

// startPart uploads the spill file (possibly empty or nil) as part w.next
// in the background. With backpressure set (a part filled by Write) it
// first waits until fewer than the writer's concurrency of such parts are
// unfinished; a part started by a checkpoint or a close does not wait.
func (w *writer) startPart(backpressure bool) error {
	s := w.spill
	w.spill, w.tail, w.tailBytes, w.merged = nil, nil, 0, 0
	if backpressure {
		select {
		case w.backlog <- struct{}{}:
		case <-w.ctx.Done():
			if s != nil {
				s.release()
			}
			return w.ctx.Err()
		}
	}
	number := w.next
	var size int64
	if s != nil {
		size = s.n
	}
	w.next++
	w.inParts += size
	w.running.Add(1)
	go func() {
		defer w.running.Done()
		var p partRec
		var err error
		select {
		case w.sem <- struct{}{}:
			p, err = w.uploadPart(number, s)
			<-w.sem
		case <-w.ctx.Done():
			err = w.ctx.Err()
		}
		if s != nil {
			s.release()
		}
		w.finished(number, p, err)
		if backpressure {
			<-w.backlog
		}
	}()
	return nil
}

// finished records the outcome of part number's upload and wakes waiters.
func (w *writer) finished(number int32, p partRec, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.asyncErr == nil {
			w.asyncErr = err
		}
	} else {
		w.results[number] = p
		for {
			if _, ok := w.results[w.have+1]; !ok {
				break
			}
			w.have++
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *writer) uploadPart(number int32, s *spillFile) (partRec, error) {
	var body io.ReadSeeker = bytes.NewReader(nil)
	var size int64
	var crc uint32
	call := []func(*s3api.Options){w.b.call()}
	if s != nil {
		body, size, crc = s.reader(), s.n, s.crc
		if h := s.payloadHash(); h != "" {
			call = append(call, withPayloadHash(h))
		}
		call = append(call, withFileBody(s.f, 0, s.n))
	}
	in := &s3api.UploadPartInput{
		Bucket: &w.b.bucket, Key: &w.rec.Key, UploadId: &w.rec.UploadID,
		PartNumber: aws.Int32(number), Body: body, ContentLength: aws.Int64(size),
	}
	p := partRec{Number: number, Size: size}
	if w.b.o.checksums {
		in.ChecksumCRC32 = crcBase64(crc)
		p.CRC32 = *in.ChecksumCRC32
	}
	out, err := w.b.client.UploadPart(w.ctx, in, call...)
	if err != nil {
		if isNoSuchUpload(err) {
			return p, &UploadGoneError{Bucket: w.b.bucket, Key: w.rec.Key, UploadID: w.rec.UploadID, Writing: true, Recorded: w.recorded.Load()}
		}
		return p, fmt.Errorf("s3: upload part %d of %s (upload %s): %w", number, w.where(), w.rec.UploadID, err)
	}
	if out.ETag == nil || *out.ETag == "" {
		return p, fmt.Errorf("s3: upload part %d of %s: the store returned no ETag", number, w.where())
	}
	p.ETag = *out.ETag
	return p, nil
}

// waitParts returns when parts 1..n have been uploaded, with the first
// failed upload's error, or when ctx is done. Safe for concurrent use.
func (w *writer) waitParts(ctx context.Context, n int32) error {
	for {
		w.mu.Lock()
		err, have, ch := w.asyncErr, w.have, w.changed
		w.mu.Unlock()
		if err != nil {
			return err
		}
		if have >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// partsUpTo returns the records of parts 1..n, all uploaded. Safe for
// concurrent use.
func (w *writer) partsUpTo(n int32) []partRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := make([]partRec, n)
	for i := range ps {
		ps[i] = w.results[int32(i)+1]
	}
	return ps
}

// Persist implements driver.PartWriter: PersistAsync, then its wait.
func (w *writer) Persist(ctx context.Context) (json.RawMessage, error) {
	wait, err := w.PersistAsync(ctx)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// PersistAsync implements driver.PartWriter. It uploads the bytes
// after the last part as a part when they reach MinPartSize, and otherwise
// stores the bytes written since the last persist as a tail object (see
// the tail object policy); both run in the background. The returned
// function waits for them and for every part started before, and returns
// the resumable; a nil error from it means the resumable's bytes are
// durable in the store. Bytes written after PersistAsync returns are not
// part of that resumable.
func (w *writer) PersistAsync(ctx context.Context) (func(context.Context) (json.RawMessage, error), error) {
	if err := w.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := w.resolveTail(); err != nil {
		return nil, err
	}
	if w.spill != nil && w.spill.n >= MinPartSize && int(w.next) < w.b.o.maxParts {
		// A part is cheaper than tail objects: its bytes go up once.
		if err := w.startPart(false); err != nil {
			return nil, err
		}
	}
	barrier := w.next - 1
	r := w.rec
	r.Kind = kindResumable
	r.BytesInParts = w.inParts
	r.Length = w.size
	var op *tailOp
	if w.spill != nil && w.spill.n > w.tailBytes {
		op = w.putTail(ctx)
	}
	r.Tail = append([]tailRec(nil), w.tail...)
	r.TailLength = w.tailBytes
	if r.Length != r.BytesInParts+r.TailLength {
		w.err = fmt.Errorf("s3: persist %s: %d bytes written, %d in parts and %d in tail objects", w.where(), r.Length, r.BytesInParts, r.TailLength)
		return nil, w.err
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		if op != nil {
			stop := context.AfterFunc(ctx, op.cancel)
			<-op.done
			stop()
			if op.err != nil {
				return nil, op.err
			}
			r.Tail[len(r.Tail)-1] = op.rec
		}
		if err := w.waitParts(ctx, barrier); err != nil {
			return nil, err
		}
		r.Parts = w.partsUpTo(barrier)
		w.recorded.Store(true)
		return json.Marshal(r)
	}, nil
}

// tailOp is a tail object being put in the background.
type tailOp struct {
	spill  *spillFile
	cancel context.CancelFunc
	done   chan struct{} // closed when rec or err is set
	rec    tailRec
	err    error
}

// resolveTail completes the tail list with the outcome of the last tail
// put, waiting for it if it still runs (only when its persist was
// abandoned).
func (w *writer) resolveTail() error {
	op := w.op
	if op == nil {
		return nil
	}
	<-op.done
	w.op = nil
	if op.err != nil {
		w.err = op.err
		return w.err
	}
	if op.spill == w.spill && len(w.tail) > 0 {
		w.tail[len(w.tail)-1] = op.rec
	}
	return nil
}

// putTail starts the put of a new tail object for the spill file's bytes
// after the tail (a delta), or for those and the deltas before them (a
// merge), or for all of them; it updates the tail list at once, its last
// entry waiting for the put's CRC.
func (w *writer) putTail(ctx context.Context) *tailOp {
	s := w.spill
	from, keep := w.tailBytes, len(w.tail)
	if deltas := len(w.tail) - w.merged; deltas >= w.deltaLimit {
		w.deltaLimit = w.drawDeltaLimit()
		if w.merged >= maxMerged {
			from, keep, w.merged = 0, 0, 1
		} else {
			from = 0
			for _, t := range w.tail[:w.merged] {
				from += t.Length
			}
			keep = w.merged
			w.merged++
		}
	}
	key := w.b.newTailKey(w.rec.Target)
	n := s.n - from
	w.tail = append(w.tail[:keep:keep], tailRec{Key: key, Length: n})
	w.tailBytes = s.n
	putCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	op := &tailOp{spill: s, cancel: cancel, done: make(chan struct{})}
	w.op = op
	s.retain()
	w.running.Add(1)
	go func() {
		defer w.running.Done()
		defer close(op.done)
		defer cancel()
		defer s.release()
		op.rec, op.err = w.putTailObject(putCtx, s, key, from, n)
	}()
	return op
}

// putTailObject writes bytes [from, from+n) of s as the tail object key.
func (w *writer) putTailObject(ctx context.Context, s *spillFile, key string, from, n int64) (tailRec, error) {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(s.f, from, n)); err != nil {
		return tailRec{}, fmt.Errorf("s3: persist %s: spill file: %w", w.where(), err)
	}
	crc := h.Sum32()
	in := &s3api.PutObjectInput{
		Bucket: &w.b.bucket, Key: &key, Body: io.NewSectionReader(s.f, from, n), ContentLength: aws.Int64(n),
		ContentType:          aws.String("application/octet-stream"),
		ServerSideEncryption: w.b.o.sseType(), SSEKMSKeyId: w.b.o.kmsKey(),
		Metadata: map[string]string{metaID: w.rec.ID},
	}
	if w.b.o.checksums {
		in.ChecksumCRC32 = crcBase64(crc)
	}
	if _, err := w.b.client.PutObject(ctx, in, w.b.call(), withFileBody(s.f, from, n)); err != nil {
		return tailRec{}, fmt.Errorf("s3: persist %s: write tail object %s: %w", w.where(), w.b.objURL(key), err)
	}
	return tailRec{Key: key, Length: n, CRC32: *crcBase64(crc)}, nil
}

// loadTail reads the tail objects of r into a new spill file and checks
// them.
func (w *writer) loadTail(ctx context.Context, r record) error {
	s, err := w.b.newSpill()
	if err != nil {
		return err
	}
	w.spill = s
	buf := make([]byte, 256<<10)
	for _, t := range r.Tail {
		tailURL := w.b.objURL(t.Key)
		out, err := w.b.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &w.b.bucket, Key: &t.Key}, w.b.call())
		if isNotFound(err) {
			return dataLoss("s3: resume %s: tail object %s, recorded with %d bytes, is missing", w.where(), tailURL, t.Length)
		}
		if err != nil {
			return fmt.Errorf("s3: resume %s: read tail object %s: %w", w.where(), tailURL, err)
		}
		start := s.n
		var crc uint32
		// Read one byte more than recorded to tell longer from equal.
		src := io.LimitReader(out.Body, t.Length+1)
		for {
			n, rerr := src.Read(buf)
			if n > 0 {
				crc = crc32.Update(crc, crc32.IEEETable, buf[:n])
				if werr := s.write(buf[:n]); werr != nil {
					out.Body.Close()
					return fmt.Errorf("s3: resume %s: spill file: %w", w.where(), werr)
				}
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				out.Body.Close()
				return fmt.Errorf("s3: resume %s: read tail object %s: %w", w.where(), tailURL, rerr)
			}
		}
		out.Body.Close()
		if got := s.n - start; got != t.Length {
			return dataLoss("s3: resume %s: tail object %s has %d bytes, the checkpoint recorded %d", w.where(), tailURL, got, t.Length)
		}
		if got := *crcBase64(crc); got != t.CRC32 {
			return dataLoss("s3: resume %s: tail object %s has CRC-32 %s, the checkpoint recorded %s", w.where(), tailURL, got, t.CRC32)
		}
	}
	w.tail = append([]tailRec(nil), r.Tail...)
	w.tailBytes = s.n
	// The resumable does not say which of its objects were merges: count
	// at most maxMerged as such, so that the next persists merge the
	// others (a writer released and resumed at every persist would
	// otherwise only ever add deltas, past maxTailObjects).
	w.merged = min(len(w.tail), maxMerged)
	return nil
}

// CloseForCommit implements driver.PartWriter: it waits for the part
// uploads in flight and uploads the bytes after the last part as the last
// part (an empty part file is one empty part). A nil error means every
// byte is in the upload and the pending names exactly its parts.
func (w *writer) CloseForCommit(ctx context.Context) (json.RawMessage, error) {
	if err := w.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if (w.spill != nil && w.spill.n > 0) || w.next == 1 {
		if err := w.startPart(false); err != nil {
			return nil, err
		}
	}
	last := w.next - 1
	if err := w.waitParts(ctx, last); err != nil {
		return nil, err
	}
	r := w.rec
	r.Kind = kindPending
	r.Parts = w.partsUpTo(last)
	r.BytesInParts = w.inParts
	r.Length = w.size
	r.Tail, r.TailLength = nil, 0
	if r.Length != r.BytesInParts {
		w.err = fmt.Errorf("s3: close %s: %d bytes written, %d in parts", w.where(), r.Length, r.BytesInParts)
		return nil, w.err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	w.Close()
	return data, nil
}

// Close implements driver.PartWriter: it stops the part uploads in
// flight, waits for the tail puts of persists (their results may still be
// awaited by a concurrent PersistAsync wait), and removes the spill files. The upload and the tail objects stay:
// a checkpoint may reference them (the sweep removes orphans).
func (w *writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.cancel()
	w.running.Wait()
	if w.spill != nil {
		w.spill.release()
		w.spill = nil
	}
	return nil
}
