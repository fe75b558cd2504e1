package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/committer"
)

// writer is one multipart upload: a committer.PartWriter and
// committer.Limited. Not safe for concurrent use; its part uploads run on
// their own goroutines.
type writer struct {
	b   *Backend
	rec record // target, key, upload id, id; parts and tail as last persisted

	ctx    context.Context // of the part uploads; canceled by Close
	cancel context.CancelFunc
	sem    chan struct{} // one token per part upload in flight

	mu       sync.Mutex
	finished map[int32]partRec // part uploads done, not yet collected
	asyncErr error             // first failed part upload

	parts   []partRec // collected parts, numbered 1..len
	next    int32     // number of the part being filled
	inParts int64     // bytes in parts started (finished or in flight)

	spill  *spillFile // bytes of the part being filled; nil when none
	size   int64      // bytes written, including resumed ones
	err    error      // sticky: the writer is broken
	closed bool
	// tail lists the tail objects that hold, in order, the first tailBytes
	// bytes of the spill file.
	tail      []tailRec
	tailBytes int64
}

var (
	_ committer.PartWriter = (*writer)(nil)
	_ committer.Limited    = (*writer)(nil)
)

func newWriter(b *Backend, r record) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{
		b: b, rec: r, ctx: ctx, cancel: cancel,
		sem:      make(chan struct{}, b.o.concurrency),
		finished: map[int32]partRec{},
		parts:    append([]partRec(nil), r.Parts...),
		next:     int32(len(r.Parts)) + 1,
		inParts:  r.BytesInParts,
		size:     r.Length,
	}
	return w
}

// spillFile holds the bytes of one part on local disk, with their CRC-32
// and the CRC-32 of the bytes after a mark (the bytes not yet in a tail
// object).
type spillFile struct {
	f       *os.File
	name    string // non-empty while the file must still be removed by name
	n       int64
	crc     uint32
	markCRC uint32
}

func (b *Backend) newSpill() (*spillFile, error) {
	f, err := os.CreateTemp(b.o.spillDir, "filesink-s3-*.part")
	if err != nil {
		return nil, fmt.Errorf("s3: spill file: %w", err)
	}
	s := &spillFile{f: f, name: f.Name()}
	// Unlinked at once where the OS allows it: the bytes live as long as
	// the descriptor, and a crash leaves nothing behind.
	if os.Remove(f.Name()) == nil {
		s.name = ""
	}
	return s, nil
}

func (s *spillFile) write(p []byte) error {
	n, err := s.f.Write(p)
	s.crc = crc32.Update(s.crc, crc32.IEEETable, p[:n])
	s.markCRC = crc32.Update(s.markCRC, crc32.IEEETable, p[:n])
	s.n += int64(n)
	return err
}

func (s *spillFile) reader() io.ReadSeeker { return io.NewSectionReader(s.f, 0, s.n) }

func (s *spillFile) release() {
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

// Write implements committer.PartWriter: bytes go to the spill file; every
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
			if err := w.startPart(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// Size implements committer.PartWriter.
func (w *writer) Size() int64 { return w.size }

// MustRoll implements committer.Limited: true once the part being filled is
// the last one the upload may have.
func (w *writer) MustRoll() bool { return int(w.next) >= w.b.o.maxParts }

// startPart uploads the spill file (possibly empty or nil) as part w.next in
// the background, waiting for a free upload slot first.
func (w *writer) startPart() error {
	s := w.spill
	w.spill, w.tail, w.tailBytes = nil, nil, 0
	number := w.next
	var size int64
	if s != nil {
		size = s.n
	}
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		if s != nil {
			s.release()
		}
		return w.ctx.Err()
	}
	w.next++
	w.inParts += size
	go func() {
		p, err := w.uploadPart(number, s)
		if s != nil {
			s.release()
		}
		w.mu.Lock()
		if err != nil {
			if w.asyncErr == nil {
				w.asyncErr = err
			}
		} else {
			w.finished[number] = p
		}
		w.mu.Unlock()
		<-w.sem // the result is recorded before the token is returned
	}()
	return nil
}

func (w *writer) uploadPart(number int32, s *spillFile) (partRec, error) {
	var body io.ReadSeeker = bytes.NewReader(nil)
	var size int64
	var crc uint32
	if s != nil {
		body, size, crc = s.reader(), s.n, s.crc
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
	out, err := w.b.client.UploadPart(w.ctx, in, w.b.call())
	if err != nil {
		if isNoSuchUpload(err) {
			return p, &UploadGoneError{Bucket: w.b.bucket, Key: w.rec.Key, UploadID: w.rec.UploadID}
		}
		return p, fmt.Errorf("s3: upload part %d of %s (upload %s): %w", number, w.where(), w.rec.UploadID, err)
	}
	if out.ETag == nil || *out.ETag == "" {
		return p, fmt.Errorf("s3: upload part %d of %s: the store returned no ETag", number, w.where())
	}
	p.ETag = *out.ETag
	return p, nil
}

// drain waits for every part upload in flight and collects their results.
// On return no byte is in flight.
func (w *writer) drain(ctx context.Context) error {
	if err := w.acquireAll(ctx.Done()); err != nil {
		return ctx.Err()
	}
	if err := w.usable(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for int32(len(w.parts))+1 < w.next {
		p, ok := w.finished[int32(len(w.parts))+1]
		if !ok {
			// Cannot happen: every started part finished or failed.
			w.err = fmt.Errorf("s3: %s: part %d neither finished nor failed", w.where(), len(w.parts)+1)
			return w.err
		}
		delete(w.finished, p.Number)
		w.parts = append(w.parts, p)
	}
	return nil
}

// acquireAll waits until no part upload is in flight (it holds every
// upload token, then gives them back), or until done is closed.
func (w *writer) acquireAll(done <-chan struct{}) error {
	n := 0
	defer func() {
		for range n {
			<-w.sem
		}
	}()
	for n < cap(w.sem) {
		select {
		case w.sem <- struct{}{}:
			n++
		case <-done:
			return errors.New("canceled")
		}
	}
	return nil
}

// Persist implements committer.PartWriter: it waits for the part uploads in
// flight, then stores the bytes written since the last Persist as a new
// tail object (the whole tail as one object when the resumable lists
// maxTailObjects of them already), or uploads the bytes after the last part
// as a part when they reach MinPartSize; and returns the resumable. A nil
// error means the returned resumable's bytes are durable in the store.
func (w *writer) Persist(ctx context.Context) (json.RawMessage, error) {
	if err := w.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if w.spill != nil && w.spill.n >= MinPartSize && int(w.next) < w.b.o.maxParts {
		// A part is cheaper than tail objects: its bytes go up once.
		if err := w.startPart(); err != nil {
			return nil, err
		}
	}
	if err := w.drain(ctx); err != nil {
		return nil, err
	}
	if w.spill != nil && w.spill.n > w.tailBytes {
		if len(w.tail) >= maxTailObjects {
			if err := w.putTail(ctx, 0); err != nil {
				return nil, err
			}
		} else if err := w.putTail(ctx, w.tailBytes); err != nil {
			return nil, err
		}
	}
	r := w.rec
	r.Kind = kindResumable
	r.Parts = append([]partRec(nil), w.parts...)
	r.BytesInParts = w.inParts
	r.Tail = append([]tailRec(nil), w.tail...)
	r.TailLength = w.tailBytes
	r.Length = w.size
	if r.Length != r.BytesInParts+r.TailLength {
		w.err = fmt.Errorf("s3: persist %s: %d bytes written, %d in parts and %d in tail objects", w.where(), r.Length, r.BytesInParts, r.TailLength)
		return nil, w.err
	}
	return json.Marshal(r)
}

// putTail writes the spill file from offset from (0 or tailBytes) to its
// end as a new tail object, replacing the tail list (from 0) or extending
// it. Every tail object has a new name: one that an older checkpoint
// references is never replaced.
func (w *writer) putTail(ctx context.Context, from int64) error {
	s := w.spill
	key := w.b.newTailKey(w.rec.Target)
	n := s.n - from
	crc := s.markCRC
	if from == 0 {
		crc = s.crc
	}
	in := &s3api.PutObjectInput{
		Bucket: &w.b.bucket, Key: &key, Body: io.NewSectionReader(s.f, from, n), ContentLength: aws.Int64(n),
		ContentType:          aws.String("application/octet-stream"),
		ServerSideEncryption: w.b.o.sseType(), SSEKMSKeyId: w.b.o.kmsKey(),
		Metadata: map[string]string{metaID: w.rec.ID},
	}
	if w.b.o.checksums {
		in.ChecksumCRC32 = crcBase64(crc)
	}
	if _, err := w.b.client.PutObject(ctx, in, w.b.call()); err != nil {
		return fmt.Errorf("s3: persist %s: write tail object %s: %w", w.where(), w.b.objURL(key), err)
	}
	t := tailRec{Key: key, Length: n, CRC32: *crcBase64(crc)}
	if from == 0 {
		w.tail = []tailRec{t}
	} else {
		w.tail = append(w.tail, t)
	}
	w.tailBytes = s.n
	s.markCRC = 0
	return nil
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
		s.markCRC = 0
		// Read one byte more than recorded to tell longer from equal.
		src := io.LimitReader(out.Body, t.Length+1)
		for {
			n, rerr := src.Read(buf)
			if n > 0 {
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
		if got := *crcBase64(s.markCRC); got != t.CRC32 {
			return dataLoss("s3: resume %s: tail object %s has CRC-32 %s, the checkpoint recorded %s", w.where(), tailURL, got, t.CRC32)
		}
	}
	s.markCRC = 0
	w.tail = append([]tailRec(nil), r.Tail...)
	w.tailBytes = s.n
	return nil
}

// CloseForCommit implements committer.PartWriter: it waits for the part
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
		if err := w.startPart(); err != nil {
			return nil, err
		}
	}
	if err := w.drain(ctx); err != nil {
		return nil, err
	}
	r := w.rec
	r.Kind = kindPending
	r.Parts = append([]partRec(nil), w.parts...)
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

// Close implements committer.PartWriter: it stops the part uploads in
// flight and removes the spill files. The upload and the tail objects stay:
// a checkpoint may reference them (the sweep removes orphans).
func (w *writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.cancel()
	w.acquireAll(nil)
	if w.spill != nil {
		w.spill.release()
		w.spill = nil
	}
	return nil
}
