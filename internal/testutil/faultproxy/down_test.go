package faultproxy_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/filesink/filesink/internal/testutil/faultproxy"
)

// Down refuses connections, also to a client that had one open (kept
// alive), and Up brings the proxy back on the same URL; any HTTP server
// can be the upstream, and rules without Kinds apply to its requests.
func TestDownUp(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") }))
	t.Cleanup(up.Close)
	p := faultproxy.NewSeeded(t, up.URL, 1)
	get := func() (string, int, error) {
		resp, err := http.Get(p.URL() + "/x")
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), resp.StatusCode, err
	}
	if body, code, err := get(); err != nil || code != 200 || body != "hello" {
		t.Fatalf("before Down: %q %d %v", body, code, err)
	}
	p.Down()
	for range 2 {
		if _, _, err := get(); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("while down: %v, want connection refused", err)
		}
	}
	p.Up(t)
	if body, code, err := get(); err != nil || code != 200 || body != "hello" {
		t.Fatalf("after Up: %q %d %v", body, code, err)
	}
	id := p.Add(faultproxy.Rule{Action: faultproxy.SlowDown, Times: 1})
	if _, code, err := get(); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("with a SlowDown rule: %d %v, want 503", code, err)
	}
	if p.Fired(id) != 1 {
		t.Fatalf("the rule fired %d times", p.Fired(id))
	}
	p.Down()
	p.Down() // idempotent
	p.Up(t)
	p.Up(t)
	if _, code, err := get(); err != nil || code != 200 {
		t.Fatalf("after Down, Down, Up, Up: %d %v", code, err)
	}
}
