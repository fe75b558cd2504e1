package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver is an HTTP endpoint for the HTTP sink tests: it counts every
// delivery of every generated record (by "id"), and counts them again
// taking only the first delivery of each Idempotency-Key, as a receiver
// that deduplicates on the key would. A key that comes back with another
// body is a problem (deduplicating on it would lose records).
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	count    int64
	all      []int32 // id -> deliveries
	byKey    []int32 // id -> deliveries in first-seen keys
	keys     map[string][32]byte
	requests int
	problems []string
	// failEvery > 0 answers 503 to about one request in failEvery (before
	// reading it), so that retries happen. Set before the server starts.
	failEvery int
	rng       *rand.Rand
	// delay is how long each request takes (a slow receiver).
	delay time.Duration
}

// newReceiver starts a receiver of count generated records; it answers
// 503 to about one request in failEvery (0: never) and takes delay per
// request.
func newReceiver(t *testing.T, count int64, failEvery int, delay time.Duration) *receiver {
	r := &receiver{count: count, all: make([]int32, count), byKey: make([]int32, count), keys: map[string][32]byte{},
		rng: rand.New(rand.NewPCG(1, 2)), failEvery: failEvery, delay: delay}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) problem(format string, args ...any) {
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	fail := r.failEvery > 0 && r.rng.IntN(r.failEvery) == 0
	r.mu.Unlock()
	if fail {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the sender died mid-request
	}
	key := req.Header.Get("Idempotency-Key")
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-ndjson" || key == "" {
		r.problem("request %s %s, Content-Type %q, key %q", req.Method, req.URL, req.Header.Get("Content-Type"), key)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if len(body) == 0 || body[len(body)-1] != '\n' {
		r.problem("key %s: body does not end with a newline", key)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if n, _ := strconv.Atoi(req.Header.Get("Filesink-Records")); n != len(lines) {
		r.problem("key %s: %d lines, Filesink-Records %d", key, len(lines), n)
	}
	sum := sha256.Sum256(body)
	prev, seen := r.keys[key]
	if seen && prev != sum {
		r.problem("key %s came back with another body", key)
	}
	if !seen {
		r.keys[key] = sum
	}
	for _, l := range lines {
		var rec genRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.ID == nil || *rec.ID < 0 || *rec.ID >= r.count {
			r.problem("key %s: line %.80q is not a generated record", key, l)
			continue
		}
		r.all[*rec.ID]++
		if !seen {
			r.byKey[*rec.ID]++
		}
	}
}

// stats returns the distinct keys and the deliveries so far.
func (r *receiver) stats() (keys, deliveries int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.all {
		deliveries += int(n)
	}
	return len(r.keys), deliveries
}

// check fails the test for problems, for records never delivered, and,
// with exact, for records not exactly once counting by key.
func (r *receiver) check(t *testing.T, exact bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Error(p)
	}
	var missing, notOnce []string
	for id := range r.count {
		if r.all[id] == 0 {
			missing = append(missing, strconv.FormatInt(id, 10))
		}
		if exact && r.byKey[id] != 1 {
			notOnce = append(notOnce, fmt.Sprintf("%d x%d", id, r.byKey[id]))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d records never arrived, e.g. ids %s", len(missing), r.count, strings.Join(missing[:min(10, len(missing))], ", "))
	}
	if len(notOnce) > 0 {
		t.Errorf("%d of %d records not exactly once counting each Idempotency-Key once, e.g. %s", len(notOnce), r.count, strings.Join(notOnce[:min(10, len(notOnce))], ", "))
	}
}
