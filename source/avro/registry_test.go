package avro_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/source/avro"
)

// logBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// behindProxy is a Schema Registry (srfake) expecting basic auth user:pw,
// with schema s registered as t-value, behind a fault proxy; the URL to
// give the client has the user info user:secret.
type behindProxy struct {
	fake  *srfake.Registry
	proxy *faultproxy.Proxy
	url   string
	id    int
}

const recordR = `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`

func newBehindProxy(t *testing.T, pw string) *behindProxy {
	t.Helper()
	fake := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+pw))))
	t.Cleanup(fake.Close)
	id, _, err := fake.RegisterSchema("t-value", sr.Schema{Schema: recordR, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.New(t, fake.URL())
	return &behindProxy{fake: fake, proxy: p, url: strings.Replace(p.URL(), "http://", "http://user:secret@", 1), id: id}
}

// requests returns how many requests p received (the proxy sorts them
// by S3 operation).
func requests(p *faultproxy.Proxy) int64 {
	var n int64
	for _, k := range faultproxy.Kinds() {
		n += p.Requests(k)
	}
	return n
}

// retries is a retry hook that records the errors and signals each.
type retries struct {
	mu   sync.Mutex
	errs []error
	each chan struct{}
}

func newRetries() *retries { return &retries{each: make(chan struct{}, 1000)} }

func (r *retries) hook(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	r.each <- struct{}{}
}

func (r *retries) wait(n int) {
	for range n {
		<-r.each
	}
}

func (r *retries) all() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// The registry refusing connections, then resetting them, then answering
// 503: Decode waits through it all and returns the value's JSON once the
// registry answers; the log has one warning and one line when it is back;
// no error or line shows the password.
func TestRegistryOutage(t *testing.T) {
	bp := newBehindProxy(t, "secret")
	var log logBuffer
	rs := newRetries()
	reg, err := avro.NewRegistry([]string{bp.url}, avro.WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		avro.WithRetryHook(rs.hook))
	if err != nil {
		t.Fatal(err)
	}
	s := hamba.MustParse(recordR)
	value := frame(t, s, bp.id, map[string]any{"a": int64(42)})

	bp.proxy.Down()
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, _, err := avro.NewDecoder(reg).Decode(context.Background(), nil, value)
		done <- result{out, err}
	}()
	rs.wait(2) // two connections refused
	select {
	case r := <-done:
		t.Fatalf("Decode returned while the registry was down: %s, %v", r.out, r.err)
	default:
	}
	resets := bp.proxy.Add(faultproxy.Rule{Action: faultproxy.ResetBefore, Times: 2})
	unavailable := bp.proxy.Add(faultproxy.Rule{Action: faultproxy.SlowDown, Times: 2}) // 503
	bp.proxy.Up(t)
	r := <-done
	if r.err != nil || string(r.out) != `{"a":42}` {
		t.Fatalf("after the outage: %s, %v", r.out, r.err)
	}
	if bp.proxy.Fired(resets) != 2 || bp.proxy.Fired(unavailable) != 2 {
		t.Errorf("faults fired: %d resets, %d 503s, want 2 and 2", bp.proxy.Fired(resets), bp.proxy.Fired(unavailable))
	}
	errs := rs.all()
	var refused, got503 int
	for _, err := range errs {
		var re *sr.ResponseError
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			refused++
		case errors.As(err, &re) && re.StatusCode == http.StatusServiceUnavailable:
			got503++
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("a retried error shows the password: %v", err)
		}
	}
	if refused < 2 || got503 != 2 || len(errs) < 6 || reg.Retries() != int64(len(errs)) {
		t.Errorf("retried %d errors (Retries %d): %d refused, %d 503, want at least 2 refused, 2 resets, 2 503: %v", len(errs), reg.Retries(), refused, got503, errs)
	}
	out := log.String()
	if n := strings.Count(out, "schema registry unreachable, retrying"); n != 1 || !strings.Contains(out, "level=WARN") {
		t.Errorf("want one warning, got %d:\n%s", n, out)
	}
	if n := strings.Count(out, "schema registry answers again"); n != 1 {
		t.Errorf("want one line for the registry back, got %d:\n%s", n, out)
	}
	if strings.Contains(out, "secret") {
		t.Errorf("the log shows the password:\n%s", out)
	}
	// Cached: no request at all now.
	before := requests(bp.proxy)
	if _, err := reg.Schema(context.Background(), bp.id); err != nil || requests(bp.proxy) != before {
		t.Errorf("the cached schema: %v, %d requests", err, requests(bp.proxy)-before)
	}
}

// Answers that are final are not retried: an unknown id (404) is
// ErrUnknownSchema, a refused login (401) an error naming the registry and
// the status but not the password, an unknown subject an error.
func TestRegistryNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name, pw string
		call     func(*avro.Registry, *behindProxy) error
		want     []string
		wantErr  error
	}{
		{"unknown id", "secret", func(r *avro.Registry, bp *behindProxy) error {
			_, err := r.Schema(context.Background(), bp.id+100)
			return err
		}, nil, avro.ErrUnknownSchema},
		{"unknown subject", "secret", func(r *avro.Registry, bp *behindProxy) error {
			_, _, err := r.Latest(context.Background(), "nope-value")
			return err
		}, []string{"subject nope-value", "404 Not Found"}, nil},
		{"no password", "secret", func(r *avro.Registry, bp *behindProxy) error {
			noAuth, err := avro.NewRegistry([]string{bp.proxy.URL()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = noAuth.Schema(context.Background(), bp.id)
			return err
		}, []string{"401 Unauthorized", "user and password"}, nil},
		{"wrong password", "right", func(r *avro.Registry, bp *behindProxy) error {
			_, err := r.Schema(context.Background(), bp.id)
			return err
		}, []string{"403 Forbidden", "user and password"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bp := newBehindProxy(t, tc.pw)
			var log logBuffer
			reg, err := avro.NewRegistry([]string{bp.url}, avro.WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(reg, bp)
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("%v, want %v", err, tc.wantErr)
			}
			for _, w := range append(tc.want, strings.TrimPrefix(bp.proxy.URL(), "http://")) {
				if tc.wantErr == nil && !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(log.String(), "secret") {
				t.Errorf("the password shows: %v\n%s", err, log.String())
			}
			if n := requests(bp.proxy); reg.Retries() != 0 || n != 1 || log.String() != "" {
				t.Errorf("%d requests, %d retries, want 1 and 0; log:\n%s", n, reg.Retries(), log.String())
			}
		})
	}
}

// The context done ends the retries with its error.
func TestRegistryRetryCanceled(t *testing.T) {
	bp := newBehindProxy(t, "secret")
	bp.proxy.Down()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs := newRetries()
	reg, err := avro.NewRegistry([]string{bp.url}, avro.WithRetryHook(rs.hook))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := reg.Latest(ctx, "t-value")
		done <- err
	}()
	rs.wait(3)
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("%v, want context.Canceled with the last error, without the password", err)
	}
}
