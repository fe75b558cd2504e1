package faultproxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/filesink/filesink/internal/testutil/faultproxy"
)

// completeUpload uploads data as a one-part multipart upload of key and
// completes it; it returns the upload id and the complete's error.
func completeUpload(t *testing.T, c *s3.Client, bucket, key string, data []byte, optFns ...func(*s3.Options)) (string, *s3.CompleteMultipartUploadInput, error) {
	t.Helper()
	cr, err := c.CreateMultipartUpload(ctx(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.UploadPart(ctx(), &s3.UploadPartInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: cr.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(data),
	})
	if err != nil {
		t.Fatalf("UploadPart %s: %v", key, err)
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}},
	}
	_, err = c.CompleteMultipartUpload(ctx(), in, optFns...)
	return aws.ToString(cr.UploadId), in, err
}

// writeKeys returns "KIND KEY" for each write, in order.
func writeKeys(ws []faultproxy.Reply) []string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s %s", w.Kind, w.Key))
	}
	return out
}

// TestAuditWrites: the audit log holds each PutObject and
// CompleteMultipartUpload the upstream accepted, with its key, also when
// the client never heard the reply, and not the part uploads, the requests
// answered by the proxy, the failed writes or the hidden keys.
func TestAuditWrites(t *testing.T) {
	t.Parallel()
	bucket, p, c, _ := setup(t)
	if err := putObject(c, bucket, "out/a.jsonl", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := putObject(c, bucket, "out/_filesink/lanes/t/0/HEAD", []byte("head")); err != nil {
		t.Fatal(err)
	}
	if err := putObject(c, bucket, "out/_filesink-staging/.a.upload", []byte("m")); err != nil {
		t.Fatal(err)
	}
	id, _, err := completeUpload(t, c, bucket, "out/dir/b.jsonl", []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	// Answered by the proxy: MinIO never sees it, the retry lands once.
	p.FailNext(faultproxy.PutObject, faultproxy.SlowDown, 1)
	if err := putObject(c, bucket, "out/c.jsonl", []byte("c")); err != nil {
		t.Fatal(err)
	}
	// Written although the client saw a reset: in the log, as cut.
	p.FailNext(faultproxy.PutObject, faultproxy.ResetAfter, 1)
	if err := putObject(c, bucket, "out/d.jsonl", []byte("d"), noRetry); err == nil {
		t.Fatal("PutObject succeeded although its reply was cut")
	}
	// Written twice: twice in the log.
	if err := putObject(c, bucket, "out/a.jsonl", []byte("a2")); err != nil {
		t.Fatal(err)
	}

	hidden := faultproxy.HidePrefixes("out/_filesink/", "out/_filesink-staging/")
	got := writeKeys(p.Writes(hidden))
	want := []string{"PutObject out/a.jsonl", "CompleteMultipartUpload out/dir/b.jsonl", "PutObject out/c.jsonl", "PutObject out/d.jsonl", "PutObject out/a.jsonl"}
	if !slices.Equal(got, want) {
		t.Errorf("Writes(hidden) =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	all := p.Writes(nil)
	if len(all) != len(want)+2 {
		t.Errorf("Writes(nil) has %d writes, want %d (the hidden keys too): %v", len(all), len(want)+2, writeKeys(all))
	}
	ws := p.Writes(hidden)
	if w := ws[1]; w.UploadID != id || w.Status != http.StatusOK || w.Bucket != bucket || w.ETag == "" || w.Cut {
		t.Errorf("the complete's entry = %v, want upload %s, 200, an ETag, not cut", w, id)
	}
	if w := ws[3]; !w.Cut || !w.OK() {
		t.Errorf("the PutObject whose reply was cut: %v, want OK and cut", w)
	}
	for i, w := range ws {
		if w.Seq <= 0 || (i > 0 && w.Seq <= ws[i-1].Seq) {
			t.Errorf("Seq not increasing: %v", ws)
		}
	}
	if n := p.Statuses(faultproxy.UploadPart)[http.StatusOK]; n != 1 {
		t.Errorf("Statuses(UploadPart)[200] = %d, want 1", n)
	}
	for _, r := range p.Replies() {
		if r.Kind == faultproxy.UploadPart {
			t.Errorf("a part upload is in the log: %v", r)
		}
	}
}

// TestAuditFailedWrites: a conditional PUT that loses (412) and a second
// complete of a completed upload (NoSuchUpload) are replies, not writes;
// CountReplies counts the 412s under a prefix.
func TestAuditFailedWrites(t *testing.T) {
	t.Parallel()
	bucket, p, c, _ := setup(t)
	head := "out/_filesink/lanes/t/3/HEAD"
	cond := func(key string, ifNoneMatch bool, ifMatch string) error {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("v")}
		if ifNoneMatch {
			in.IfNoneMatch = aws.String("*")
		}
		if ifMatch != "" {
			in.IfMatch = aws.String(ifMatch)
		}
		_, err := c.PutObject(ctx(), in, noRetry)
		return err
	}
	if err := cond(head, true, ""); err != nil {
		t.Fatalf("create %s: %v", head, err)
	}
	for i, err := range []error{cond(head, true, ""), cond(head, false, `"0123456789abcdef0123456789abcdef"`), cond("out/x.jsonl", false, `"0123456789abcdef0123456789abcdef"`)} {
		var re interface{ HTTPStatusCode() int }
		if !errors.As(err, &re) || (re.HTTPStatusCode() != 412 && re.HTTPStatusCode() != 404) {
			t.Errorf("conditional write %d: %v, want 412 (or 404 for an absent key)", i, err)
		}
	}
	if n := p.CountReplies(faultproxy.PutObject, http.StatusPreconditionFailed, "out/_filesink/lanes/"); n != 2 {
		t.Errorf("CountReplies(PutObject, 412, lanes) = %d, want 2; replies:\n%s", n, replyLines(p.Replies()))
	}
	if n := p.CountReplies(faultproxy.PutObject, http.StatusPreconditionFailed, "out/_filesink/jobs/"); n != 0 {
		t.Errorf("CountReplies under another prefix = %d, want 0", n)
	}
	if n := p.Statuses(faultproxy.PutObject)[http.StatusPreconditionFailed]; n < 2 {
		t.Errorf("Statuses(PutObject)[412] = %d, want at least 2", n)
	}
	for _, r := range p.Replies() {
		if r.Status == 412 && r.ErrCode != "PreconditionFailed" {
			t.Errorf("a 412 reply without its error code: %v", r)
		}
	}

	// A complete whose reply is cut, retried by the client: NoSuchUpload.
	p.FailNext(faultproxy.CompleteMultipartUpload, faultproxy.ResetAfter, 1)
	_, in, err := completeUpload(t, c, bucket, "out/e.jsonl", []byte("e"), noRetry)
	if err == nil {
		t.Fatal("the complete succeeded although its reply was cut")
	}
	if _, err := c.CompleteMultipartUpload(ctx(), in, noRetry); err == nil {
		t.Fatal("a second complete of a completed upload succeeded")
	}
	var completes []faultproxy.Reply
	for _, r := range p.Replies() {
		if r.Kind == faultproxy.CompleteMultipartUpload {
			completes = append(completes, r)
		}
	}
	if len(completes) != 2 || !completes[0].OK() || !completes[0].Cut || completes[1].OK() || completes[1].ErrCode != "NoSuchUpload" {
		t.Errorf("the completes' replies:\n%s\nwant an OK one (cut), then NoSuchUpload", replyLines(completes))
	}
	got := writeKeys(p.Writes(faultproxy.HidePrefixes("out/_filesink/")))
	if want := []string{"CompleteMultipartUpload out/e.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("Writes = %v, want %v", got, want)
	}
}

func replyLines(rs []faultproxy.Reply) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}
