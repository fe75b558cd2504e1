package faultproxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// Reply is the upstream's answer to a request that writes an object: a
// PutObject or a CompleteMultipartUpload (part uploads and copies are not
// logged). It is what MinIO answered, whether or not the client heard it.
type Reply struct {
	// Seq numbers the replies in the order the proxy got them, from 1.
	Seq int64
	// Kind is PutObject or CompleteMultipartUpload.
	Kind Kind
	// Bucket and Key name the object written (the key unescaped).
	Bucket, Key string
	// UploadID is the upload a CompleteMultipartUpload completed.
	UploadID string
	// Status is the upstream's HTTP status code.
	Status int
	// ErrCode is the S3 error code of the reply's body, if any: an error
	// answer, or a CompleteMultipartUpload that MinIO answered with 200
	// and then an error document (it sends the status early to keep a long
	// complete alive).
	ErrCode string
	// ETag is the reply's ETag header, or the ETag of a complete's body.
	ETag string
	// Cut is true when the client never heard the reply (ResetAfter).
	Cut bool
}

// OK reports whether the write happened: a 2xx status without an error
// document.
func (r Reply) OK() bool { return r.Status >= 200 && r.Status < 300 && r.ErrCode == "" }

// String returns the reply on one line, for logs.
func (r Reply) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s/%s", r.Seq, r.Kind, r.Bucket, r.Key)
	if r.UploadID != "" {
		fmt.Fprintf(&b, " upload=%s", r.UploadID)
	}
	fmt.Fprintf(&b, " -> %d", r.Status)
	if r.ErrCode != "" {
		fmt.Fprintf(&b, " %s", r.ErrCode)
	}
	if r.ETag != "" {
		fmt.Fprintf(&b, " etag=%s", r.ETag)
	}
	if r.Cut {
		b.WriteString(" (reply cut: the client never heard it)")
	}
	return b.String()
}

// HidePrefixes returns a predicate for Writes that hides the keys starting
// with any of the prefixes (such as "out/_filesink/" and
// "out/_filesink-staging/"), in any bucket.
func HidePrefixes(prefixes ...string) func(bucket, key string) bool {
	prefixes = append([]string(nil), prefixes...)
	return func(_, key string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(key, p) {
				return true
			}
		}
		return false
	}
}

// Replies returns every upstream reply to a PutObject or a
// CompleteMultipartUpload so far, in the order they came.
func (p *Proxy) Replies() []Reply {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Reply(nil), p.replies...)
}

// Seq returns the Seq of the last reply logged (0: none yet): a reply
// with a greater Seq came after this call.
func (p *Proxy) Seq() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

// Writes returns the audit log of writes to visible keys: the replies to
// PutObject and CompleteMultipartUpload that are OK, in the order they
// came, except those to keys for which hidden returns true (nil: every key
// is visible). A key that is in it twice was written twice.
func (p *Proxy) Writes(hidden func(bucket, key string) bool) []Reply {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Reply
	for _, r := range p.replies {
		if r.OK() && (hidden == nil || !hidden(r.Bucket, r.Key)) {
			out = append(out, r)
		}
	}
	return out
}

// CountReplies returns how many upstream replies to requests of kind k
// (PutObject or CompleteMultipartUpload) had the given status and a key
// starting with keyPrefix: CountReplies(PutObject, 412, "out/_filesink/lanes/")
// counts the conditional writes under that prefix that lost.
func (p *Proxy) CountReplies(k Kind, status int, keyPrefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.replies {
		if r.Kind == k && r.Status == status && strings.HasPrefix(r.Key, keyPrefix) {
			n++
		}
	}
	return n
}

// Statuses returns how many upstream replies to requests of kind k had
// each status code (every kind; a faulted request that never reached the
// upstream is not counted).
func (p *Proxy) Statuses(k Kind) map[int]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[int]int64{}
	for s, n := range p.statuses[k] {
		m[s] = n
	}
	return m
}

// audited reports whether the replies to kind k go in the audit log.
func audited(k Kind) bool { return k == PutObject || k == CompleteMultipartUpload }

// record notes the upstream's reply resp to req, whose body it may replace
// (a CompleteMultipartUpload's is read to find an error document or the
// ETag; it is small). cut says the client will not hear it.
func (p *Proxy) record(req *http.Request, resp *http.Response, cut bool) error {
	k := Classify(req)
	rep := Reply{Kind: k, Status: resp.StatusCode, ETag: resp.Header.Get("ETag"), Cut: cut}
	var readErr error
	if audited(k) && (k == CompleteMultipartUpload || rep.Status >= 300) {
		var body []byte
		body, readErr = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if m := errCodeRE.FindSubmatch(body); m != nil {
			rep.ErrCode = string(m[1])
		} else if m := etagRE.FindSubmatch(body); m != nil && rep.ETag == "" {
			rep.ETag = strings.ReplaceAll(string(m[1]), "&#34;", `"`)
		}
		if readErr != nil && rep.ErrCode == "" {
			// The upstream cut its reply: the outcome is unknown to us too.
			rep.ErrCode = "reply unreadable: " + readErr.Error()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.statuses[k] == nil {
		p.statuses[k] = map[int]int64{}
	}
	p.statuses[k][rep.Status]++
	if audited(k) {
		rep.Bucket, rep.Key = splitPath(req.URL.Path)
		rep.UploadID = req.URL.Query().Get("uploadId")
		p.seq++
		rep.Seq = p.seq
		p.replies = append(p.replies, rep)
	}
	return readErr
}

var (
	errCodeRE = regexp.MustCompile(`<Error>\s*<Code>([^<]*)</Code>`)
	etagRE    = regexp.MustCompile(`<ETag>([^<]*)</ETag>`)
)
