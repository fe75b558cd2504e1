package httpsink_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/sinks/httpsink"
	"github.com/filesink/filesink/source"
)

func batch(records ...string) *async.Batch {
	b := &async.Batch{Subtask: 1, Checkpoint: 4, Seq: 9, First: 100}
	for _, r := range records {
		b.Records = append(b.Records, []byte(r))
		b.Bytes += len(r)
	}
	b.Key = async.Key("job", b.Subtask, b.Seq, b.First, b.Records)
	return b
}

func fastRetry() httpsink.Option { return httpsink.WithRetry(4, time.Millisecond, 5*time.Millisecond) }

func TestSendPostsNDJSONWithTheKey(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, ctype, key, seq, sub, ckpt, n, body string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), r.Header.Get("Filesink-Batch-Seq"),
			r.Header.Get("Filesink-Subtask"), r.Header.Get("Filesink-Checkpoint"), r.Header.Get("Filesink-Records"), string(body)}
	}))
	defer srv.Close()
	c, err := httpsink.New(srv.URL + "/ingest")
	if err != nil {
		t.Fatal(err)
	}
	b := batch(`{"id":1}`, `{"id":2}`)
	if err := c.Send(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	s := <-got
	want := seen{"POST", "application/x-ndjson", b.Key, "9", "1", "4", "2", "{\"id\":1}\n{\"id\":2}\n"}
	if s != want {
		t.Errorf("request %+v, want %+v", s, want)
	}
}

// 5xx, 429 and a cut connection are retried, with the same key each time.
func TestTransientFailuresAreRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		switch n.Add(1) {
		case 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case 3:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // reset before the reply
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	c, _ := httpsink.New(srv.URL, fastRetry())
	b := batch("1")
	if err := c.Send(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Fatalf("%d requests, want 4", len(keys))
	}
	for _, k := range keys {
		if k != b.Key {
			t.Errorf("retry with key %q, want %q", k, b.Key)
		}
	}
}

// A request that takes longer than the timeout is retried; the attempts
// are bounded and the last error is returned.
func TestTimeoutsAreRetriedAndBounded(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	c, _ := httpsink.New(srv.URL, fastRetry(), httpsink.WithTimeout(20*time.Millisecond))
	err := c.Send(context.Background(), batch("1"))
	if err == nil || !strings.Contains(err.Error(), "4 attempts") || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("Send = %v, want a timeout after 4 attempts", err)
	}
	if got := n.Load(); got != 4 {
		t.Errorf("%d requests, want 4", got)
	}
}

func TestServerErrorsAreBounded(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, _ := httpsink.New(srv.URL, fastRetry())
	err := c.Send(context.Background(), batch("1"))
	var se *httpsink.StatusError
	if !errors.As(err, &se) || se.Status != 502 {
		t.Fatalf("Send = %v, want HTTP 502", err)
	}
	if got := n.Load(); got != 4 {
		t.Errorf("%d requests, want 4", got)
	}
}

// A 4xx is not retried, and its body (truncated) is in the error.
func TestClientErrorFailsWithTheBody(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	long := "field \"ts\" is not a date" + strings.Repeat(" and more", 200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, long, http.StatusUnprocessableEntity)
	}))
	defer srv.Close()
	c, _ := httpsink.New(srv.URL, fastRetry())
	err := c.Send(context.Background(), batch("1"))
	var se *httpsink.StatusError
	if !errors.As(err, &se) || se.Status != 422 {
		t.Fatalf("Send = %v, want HTTP 422", err)
	}
	if !strings.Contains(err.Error(), `field "ts" is not a date`) || !strings.HasSuffix(err.Error(), "(truncated)") || len(se.Body) > httpsink.MaxErrorBody+20 {
		t.Errorf("error %q: want the body's start, truncated", err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("%d requests, want 1 (no retry of a 4xx)", got)
	}
}

// User info goes into basic authentication, never into an error; neither
// do query values.
func TestCredentialsNeverInErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != "alice" || p != "s3cret" || r.URL.Query().Get("token") != "t0ken" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		http.Error(w, "rejected on purpose", http.StatusBadRequest)
	}))
	defer srv.Close()
	withCreds := strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1) + "/in?token=t0ken"
	c, err := httpsink.New(withCreds, fastRetry())
	if err != nil {
		t.Fatal(err)
	}
	err = c.Send(context.Background(), batch("1"))
	if err == nil || !strings.Contains(err.Error(), "rejected on purpose") {
		t.Fatalf("Send = %v, want the 400 (authenticated)", err)
	}
	// A connection error: the port is closed now.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c2, _ := httpsink.New("http://alice:s3cret@"+addr+"/in?token=t0ken", fastRetry())
	err2 := c2.Send(context.Background(), batch("1"))
	_, err3 := httpsink.New("ftp://alice:s3cret@host/?token=t0ken")
	for _, e := range []error{err, err2, err3} {
		if e == nil {
			t.Fatal("want an error")
		}
		if strings.Contains(e.Error(), "s3cret") || strings.Contains(e.Error(), "t0ken") || strings.Contains(e.Error(), "alice") {
			t.Errorf("error leaks a credential: %v", e)
		}
	}
	if s := c.String(); strings.Contains(s, "s3cret") || strings.Contains(s, "alice") || strings.Contains(s, "t0ken") {
		t.Errorf("String() = %q leaks a credential", s)
	}
}

func TestHTTPS(t *testing.T) {
	t.Parallel()
	var got atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && r.Header.Get("Idempotency-Key") != "" {
			got.Add(1)
		}
	}))
	defer srv.Close()
	c, err := httpsink.New(srv.URL, httpsink.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(context.Background(), batch("1")); err != nil {
		t.Fatal(err)
	}
	if got.Load() != 1 {
		t.Error("no TLS request with a key arrived")
	}
}

// The sink end to end: a 4xx from the receiver fails phase 1 with the
// response body in the error.
func TestSinkCheckpointFailsOnClientError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "poison") {
			http.Error(w, "record 7 is poison", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	c, _ := httpsink.New(srv.URL, fastRetry())
	s, err := httpsink.NewSink(c, 0, async.WithWorkers(2), async.WithMaxRecords(3), async.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, r := range []string{"a", "b", "c", "d", "e", "f", "poison", "h"} {
		if err := s.Write(context.Background(), []byte(r), source.Origin{Num: int64(i)}); err != nil {
			break // the failure may surface here already
		}
	}
	_, err = committer.PrepareNow(context.Background(), s, 1, true)
	if err == nil || !strings.Contains(err.Error(), "record 7 is poison") || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("Prepare = %v, want the 400 with its body", err)
	}
	if s.Name() != "http/0" {
		t.Errorf("Name() = %q", s.Name())
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:p@h:1/x?a=b&c=d": "http://h:1/x?a=xxxxx&c=xxxxx",
		"https://h/p":              "https://h/p",
		"http://u@h/":              "http://h/",
		"http://[::1:bad":          "http://(unparsable URL)",
	} {
		if got := httpsink.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
