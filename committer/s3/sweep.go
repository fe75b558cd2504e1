package s3

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/filesink/filesink/committer/driver"
)

// stagingSet is what the staging directory and the upload listing hold for
// the targets of one namespace.
type stagingSet struct {
	marker bool
	tails  []string // keys
}

// inNamespace matches the base names of part files that start with
// namespace ("" matches all).
func inNamespace(namespace string) func(base string) bool {
	return func(base string) bool { return strings.HasPrefix(base, namespace) }
}

// staging lists the staging objects of targets whose base name match
// accepts, by target; with uploads set, targets that have a multipart
// upload under the prefix are added with an empty set. AWS lists the
// uploads under a prefix; MinIO lists those of an exact key only, and
// every upload of the bucket for no prefix, which staging then asks for
// (filtering by the prefix itself) when the prefix listed none.
func (b *Backend) staging(ctx context.Context, match func(base string) bool, uploads bool) (map[string]*stagingSet, []string, error) {
	sets := map[string]*stagingSet{}
	var unknown []string
	get := func(target string) *stagingSet {
		s := sets[target]
		if s == nil {
			s = &stagingSet{}
			sets[target] = s
		}
		return s
	}
	err := b.listObjects(ctx, b.key(StagingDir)+"/", func(o s3types.Object) error {
		key := aws.ToString(o.Key)
		target, kind, ok := b.parseStaging(key)
		if !ok {
			unknown = append(unknown, key)
			return nil
		}
		if !match(path.Base(target)) {
			return nil
		}
		s := get(target)
		if kind == "marker" {
			s.marker = true
		} else {
			s.tails = append(s.tails, key)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if uploads {
		prefix := b.key("")
		if prefix != "" {
			prefix += "/"
		}
		listed := false
		var unsure []s3types.MultipartUpload
		add := func(u s3types.MultipartUpload) error {
			listed = true
			rel, ok := strings.CutPrefix(aws.ToString(u.Key), prefix)
			if ok && checkTarget(rel) == nil && match(path.Base(rel)) {
				get(rel)
			}
			return nil
		}
		err := b.listUploads(ctx, prefix, add)
		if err == nil && !listed && prefix != "" {
			// MinIO lists nothing for a prefix that is not a whole key,
			// and every upload for none: an upload whose marker is gone
			// (a paused owner created it after a sweep deleted the marker
			// of an upload not yet there) is found only that way.
			err = b.listUploads(ctx, "", func(u s3types.MultipartUpload) error {
				rel, ok := strings.CutPrefix(aws.ToString(u.Key), prefix)
				if ok && sets[rel] == nil && checkTarget(rel) == nil && match(path.Base(rel)) {
					unsure = append(unsure, u)
				}
				return nil
			})
		}
		if err == nil {
			err = b.addExisting(ctx, unsure, prefix, get)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return sets, unknown, nil
}

// addExisting adds the targets of the uploads that MinIO's bucket-wide
// listing gave and that exist. That listing comes from the server's
// memory: an upload whose CompleteMultipartUpload was cut short by a
// client that disconnected stays listed there (for a day) after its data
// is gone or published, although it can neither be listed under its key,
// nor aborted, nor completed. ListParts tells.
func (b *Backend) addExisting(ctx context.Context, ups []s3types.MultipartUpload, prefix string, get func(string) *stagingSet) error {
	for _, u := range ups {
		rel := strings.TrimPrefix(aws.ToString(u.Key), prefix)
		exists, err := b.uploadExists(ctx, record{Key: aws.ToString(u.Key), UploadID: aws.ToString(u.UploadId)})
		if err != nil {
			return fmt.Errorf("s3: %s: %w", b.objURL(aws.ToString(u.Key)), err)
		}
		if exists {
			get(rel)
		} else {
			b.o.log.Debug("s3: an upload the store lists no longer exists (ignored)", "key", aws.ToString(u.Key), "upload_id", aws.ToString(u.UploadId))
		}
	}
	return nil
}

func (b *Backend) listObjects(ctx context.Context, prefix string, fn func(s3types.Object) error) error {
	p := s3api.NewListObjectsV2Paginator(b.client, &s3api.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx, b.call())
		if err != nil {
			return fmt.Errorf("s3: list s3://%s/%s: %w", b.bucket, prefix, err)
		}
		for _, o := range out.Contents {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// listUploads lists the multipart uploads whose key starts with prefix
// (paginated).
func (b *Backend) listUploads(ctx context.Context, prefix string, fn func(s3types.MultipartUpload) error) error {
	p := s3api.NewListMultipartUploadsPaginator(b.client, &s3api.ListMultipartUploadsInput{Bucket: &b.bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx, b.call())
		if err != nil {
			return fmt.Errorf("s3: list multipart uploads of s3://%s/%s: %w", b.bucket, prefix, err)
		}
		for _, u := range out.Uploads {
			if err := fn(u); err != nil {
				return err
			}
		}
	}
	return nil
}

// uploadsOf lists the uploads of exactly key.
func (b *Backend) uploadsOf(ctx context.Context, key string) ([]s3types.MultipartUpload, error) {
	var out []s3types.MultipartUpload
	err := b.listUploads(ctx, key, func(u s3types.MultipartUpload) error {
		if aws.ToString(u.Key) == key {
			out = append(out, u)
		}
		return nil
	})
	return out, err
}

// Sweep implements driver.Backend. For every part file of namespace with
// staging data (an upload marker, tail objects, or an upload listed under
// the prefix), it aborts the multipart uploads that no entry of keep
// references, deletes the tail objects that no entry of keep references,
// and then the marker when no upload of that part file is kept. Objects of
// other namespaces, other sinks and finished objects are never touched.
// It counts the uploads it aborts and the staging objects it deletes.
func (b *Backend) Sweep(ctx context.Context, namespace string, keep []json.RawMessage) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.sweep(ctx, inNamespace(namespace), keep, "namespace", namespace)
}

// SweepEpochs is Sweep for the part files of the older owner epochs of a
// lane (group mode): those whose base name is "<lane>-e<N>-..." with N, a
// decimal number, below below, where lane is "<prefix>-<topic>.<partition>"
// (the file sink's name prefix of the lane without its epoch). It aborts
// their multipart uploads and deletes their tail objects and markers that
// no entry of keep references; nothing of epoch below or later, of another
// lane, another sink, and no finished object is touched. It counts what it
// aborts and deletes, as Sweep does. An empty lane, or one with a '/', is
// an error.
func (b *Backend) SweepEpochs(ctx context.Context, lane string, below uint64, keep []json.RawMessage) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lane == "" || strings.Contains(lane, "/") {
		return nil, fmt.Errorf("s3: sweep epochs of lane %q: not a part name prefix", lane)
	}
	return b.sweep(ctx, olderEpoch(lane, below), keep, "lane", lane, "below_epoch", below)
}

// olderEpoch matches the base names "<lane>-e<N>-..." with N < below.
func olderEpoch(lane string, below uint64) func(base string) bool {
	return func(base string) bool {
		rest, ok := strings.CutPrefix(base, lane+"-e")
		if !ok {
			return false
		}
		digits, _, ok := strings.Cut(rest, "-")
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
			return false
		}
		n, err := strconv.ParseUint(digits, 10, 64)
		return err == nil && n < below
	}
}

// sweep is Sweep for the part files whose base name match accepts; logArgs
// name them in the log.
func (b *Backend) sweep(ctx context.Context, match func(base string) bool, keep []json.RawMessage, logArgs ...any) (map[string]int64, error) {
	keptUploads := map[string]bool{}
	keptTargets := map[string]bool{}
	keptTails := map[string]bool{}
	for _, k := range keep {
		r, err := b.parse(k, "")
		if err != nil {
			return nil, err
		}
		keptUploads[r.UploadID] = true
		keptTargets[r.Target] = true
		for _, tr := range r.Tail {
			keptTails[tr.Key] = true
		}
	}
	sets, _, err := b.staging(ctx, match, true)
	if err != nil {
		return nil, err
	}
	targets := make([]string, 0, len(sets))
	for t := range sets {
		targets = append(targets, t)
	}
	slices.Sort(targets)
	// One ListMultipartUploads per part file: run them side by side.
	orphans := make([][]string, len(targets))
	aborted := make([]int64, len(targets))
	errs := make([]error, len(targets))
	sem := make(chan struct{}, sweepParallelism)
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			orphans[i], aborted[i], errs[i] = b.sweepTarget(ctx, target, sets[target], keptTargets[target], keptUploads, keptTails)
		}()
	}
	wg.Wait()
	swept := map[string]int64{driver.SweptUpload: 0, driver.SweptStagingObject: 0}
	for _, n := range aborted {
		swept[driver.SweptUpload] += n
	}
	if err := errors.Join(errs...); err != nil {
		return swept, err
	}
	var tails []string
	for _, o := range orphans {
		tails = append(tails, o...)
	}
	if err := b.deleteKeys(ctx, tails); err != nil {
		return swept, err
	}
	swept[driver.SweptStagingObject] = int64(len(tails))
	if len(tails) > 0 {
		b.o.log.Info("s3: sweep deleted orphaned staging objects", append(logArgs, "objects", len(tails))...)
	}
	return swept, nil
}

// sweepParallelism bounds the part files a Sweep examines at once.
const sweepParallelism = 16

// sweepTarget aborts the orphaned uploads of one part file and returns its
// orphaned staging objects (tails, and the marker when nothing of the part
// is kept) and how many uploads it aborted.
func (b *Backend) sweepTarget(ctx context.Context, target string, s *stagingSet, kept bool, keptUploads, keptTails map[string]bool) (orphans []string, aborted int64, err error) {
	key := b.key(target)
	ups, err := b.uploadsOf(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	for _, u := range ups {
		id := aws.ToString(u.UploadId)
		if keptUploads[id] {
			kept = true
			continue
		}
		if err := b.abort(ctx, key, id); err != nil {
			return nil, aborted, err
		}
		aborted++
		b.o.log.Info("s3: sweep aborted an orphaned upload", "key", key, "upload_id", id, "initiated", aws.ToTime(u.Initiated))
	}
	var tails []string
	for _, t := range s.tails {
		if !keptTails[t] {
			tails = append(tails, t)
		}
	}
	if s.marker && !kept {
		tails = append(tails, b.markerKey(target))
	}
	return tails, aborted, nil
}

func (b *Backend) abort(ctx context.Context, key, uploadID string) error {
	_, err := b.client.AbortMultipartUpload(ctx, &s3api.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: &uploadID}, b.call())
	if err != nil && !isNoSuchUpload(err) {
		return fmt.Errorf("s3: abort upload %s of %s: %w", uploadID, b.objURL(key), err)
	}
	return nil
}

// deleteKeys deletes objects, 1000 per request; missing ones are not an
// error.
func (b *Backend) deleteKeys(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		ids := make([]s3types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			ids[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := b.client.DeleteObjects(ctx, &s3api.DeleteObjectsInput{
			Bucket: &b.bucket, Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		}, b.call())
		if isNotImplemented(err) {
			for _, k := range keys[:n] {
				if _, err := b.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &b.bucket, Key: aws.String(k)}, b.call()); err != nil && !isNotFound(err) {
					return fmt.Errorf("s3: delete %s: %w", b.objURL(k), err)
				}
			}
		} else if err != nil {
			return fmt.Errorf("s3: delete %d staging objects: %w", n, err)
		} else {
			for _, e := range out.Errors {
				if aws.ToString(e.Code) == "NoSuchKey" {
					continue
				}
				return fmt.Errorf("s3: delete %s: %s: %s", b.objURL(aws.ToString(e.Key)), aws.ToString(e.Code), aws.ToString(e.Message))
			}
		}
		keys = keys[n:]
	}
	return nil
}

// Upload describes a multipart upload of the backend (see ListUploads).
type Upload struct {
	Target    string    // part file, relative to the prefix
	Key       string    // object key
	UploadID  string    //
	Initiated time.Time // zero if the store did not say
	Staging   string    // StagingName(Target)
	// Tails is the number of tail objects of the target.
	Tails int
}

// ListUploads lists the multipart uploads of part files whose base name
// starts with namespace ("" for all), found through the upload markers and,
// on stores that list uploads by prefix, under the prefix. It is for the
// operator (`filesink uploads list`): an upload listed here may be
// referenced by a checkpoint record (Staged tells which upload a record's
// resumable or committable needs); the recovery sweep aborts the others.
// Safe for concurrent use.
func (b *Backend) ListUploads(ctx context.Context, namespace string) ([]Upload, error) {
	sets, _, err := b.staging(ctx, inNamespace(namespace), true)
	if err != nil {
		return nil, err
	}
	var out []Upload
	for target, s := range sets {
		key := b.key(target)
		ups, err := b.uploadsOf(ctx, key)
		if err != nil {
			return nil, err
		}
		for _, u := range ups {
			out = append(out, Upload{
				Target: target, Key: key, UploadID: aws.ToString(u.UploadId),
				Initiated: aws.ToTime(u.Initiated), Staging: StagingName(target), Tails: len(s.tails),
			})
		}
	}
	slices.SortFunc(out, func(x, y Upload) int {
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		return strings.Compare(x.UploadID, y.UploadID)
	})
	return out, nil
}

// TailObject is a tail object of the backend (see ListTails): bytes of an
// in-progress part file after its uploaded parts, kept at a checkpoint.
type TailObject struct {
	Target string // part file, relative to the prefix
	Key    string // object key
}

// ListTails lists the tail objects of part files whose base name starts
// with namespace ("" for all), by key. It is for the operator (`filesink
// uploads list`): a tail object may be referenced by a checkpoint (see
// Staged); only the recovery sweep deletes the others. Safe for concurrent
// use.
func (b *Backend) ListTails(ctx context.Context, namespace string) ([]TailObject, error) {
	sets, _, err := b.staging(ctx, inNamespace(namespace), false)
	if err != nil {
		return nil, err
	}
	var out []TailObject
	for target, s := range sets {
		for _, k := range s.tails {
			out = append(out, TailObject{Target: target, Key: k})
		}
	}
	slices.SortFunc(out, func(x, y TailObject) int { return strings.Compare(x.Key, y.Key) })
	return out, nil
}

// Staged is the staging data that a resumable or a pending committable of
// the backend references (see Backend.Staged).
type Staged struct {
	Target   string   // part file, relative to the prefix
	Key      string   // object key of the part file
	UploadID string   // its multipart upload
	Tails    []string // keys of its tail objects (a resumable's)
}

// Staged returns the multipart upload and the tail objects that data, a
// resumable or pending committable of this backend (as a checkpoint record
// keeps it), references: what must not be aborted or deleted while a
// retained checkpoint keeps data. An error means data is not a valid
// record of this backend (another prefix's, or damaged). It does no I/O.
func (b *Backend) Staged(data json.RawMessage) (Staged, error) {
	r, err := b.parse(data, "")
	if err != nil {
		return Staged{}, err
	}
	st := Staged{Target: r.Target, Key: r.Key, UploadID: r.UploadID}
	for _, t := range r.Tail {
		st.Tails = append(st.Tails, t.Key)
	}
	return st, nil
}

// AbortUpload aborts one multipart upload of the backend (`filesink uploads
// abort`). Aborting an upload that a retained checkpoint references loses
// the records of that part file (its commit or resume then fails with
// ErrDataLoss): the caller must make sure it is an orphan. Aborting an
// upload that does not exist is not an error. The marker and tail objects
// are left to the sweep.
func (b *Backend) AbortUpload(ctx context.Context, key, uploadID string) error {
	prefix := b.key("")
	if prefix != "" && !strings.HasPrefix(key, prefix+"/") {
		return fmt.Errorf("s3: abort upload: key %q is not under %s", key, b.Location())
	}
	if uploadID == "" {
		return fmt.Errorf("s3: abort upload of %s: empty upload id", b.objURL(key))
	}
	if err := b.abort(ctx, key, uploadID); err != nil {
		return err
	}
	b.o.log.Info("s3: upload aborted", "key", key, "upload_id", uploadID)
	return nil
}

// Scan implements driver.Output: the staging names present (part files
// with an upload marker, tail objects or an upload listed under the prefix,
// as Describe names them), and problems: objects in the staging directory
// that this package did not name, and objects outside it named like staging
// data (visible to readers of the output).
func (b *Backend) Scan(ctx context.Context) (staging, problems []string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	sets, unknown, err := b.staging(ctx, inNamespace(""), true)
	if err != nil {
		return nil, nil, err
	}
	for target := range sets {
		staging = append(staging, StagingName(target))
	}
	slices.Sort(staging)
	for _, k := range unknown {
		problems = append(problems, fmt.Sprintf("%s: unexpected object in the staging directory", b.objURL(k)))
	}
	prefix := b.key("")
	if prefix != "" {
		prefix += "/"
	}
	stagingDir := b.key(StagingDir) + "/"
	err = b.listObjects(ctx, prefix, func(o s3types.Object) error {
		key := aws.ToString(o.Key)
		if strings.HasPrefix(key, stagingDir) {
			return nil
		}
		base := path.Base(key)
		if strings.HasSuffix(base, markerSuffix) && strings.HasPrefix(base, ".") {
			problems = append(problems, fmt.Sprintf("%s: upload marker outside %s", b.objURL(key), stagingDir))
		} else if i := strings.LastIndex(base, tailInfix); i >= 0 && isHex(base[i+len(tailInfix):], 16) {
			problems = append(problems, fmt.Sprintf("%s: tail object visible as finished output", b.objURL(key)))
		}
		return nil
	})
	return staging, problems, err
}
