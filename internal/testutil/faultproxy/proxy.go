package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Action is what a rule does to a request it fires on.
type Action int

const (
	// Forward passes the request on unchanged (after the rule's Delay): a
	// rule with Forward and a Delay is a slow request.
	Forward Action = iota
	// SlowDown answers 503 with S3's SlowDown XML error; MinIO never sees
	// the request.
	SlowDown
	// InternalError answers 500 with S3's InternalError XML error; MinIO
	// never sees the request.
	InternalError
	// ResetBefore resets the client's connection (TCP RST) without
	// forwarding: the request never reaches MinIO.
	ResetBefore
	// ResetAfter forwards the request to MinIO, reads MinIO's whole reply,
	// and then resets the client's connection instead of answering: the
	// operation happened but the client cannot know (the in-doubt case).
	ResetAfter
	// Conflict answers 409 with S3's ConditionalRequestConflict XML error
	// (another conditional write to the key raced this one); MinIO never
	// sees the request.
	Conflict
	// ConflictAfter forwards the request to MinIO, reads MinIO's whole
	// reply, and answers 409 ConditionalRequestConflict instead: the write
	// happened but the client was told it conflicted (an outcome the client
	// must resolve by reading back).
	ConflictAfter
	numActions
)

var actionNames = [numActions]string{
	Forward:       "Forward",
	SlowDown:      "SlowDown",
	InternalError: "InternalError",
	ResetBefore:   "ResetBefore",
	ResetAfter:    "ResetAfter",
	Conflict:      "Conflict",
	ConflictAfter: "ConflictAfter",
}

func (a Action) String() string {
	if a >= 0 && a < numActions {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Rule selects requests and injects a fault into them. A request is matched
// against the rules in the order they were added; the first rule that fires
// decides what happens to it. Requests no rule fires on are forwarded.
type Rule struct {
	// Kinds the rule applies to; empty means every kind.
	Kinds []Kind
	// Match, if set, must also return true. It sees the incoming request
	// (method, URL, headers) and must not call the Proxy; it may read the
	// body only through PeekBody, which puts it back.
	Match func(*http.Request) bool
	// Action to take.
	Action Action
	// Prob is the probability that the rule fires on a matching request,
	// drawn from the proxy's seeded generator; 0 (or >= 1) means always.
	Prob float64
	// Times bounds how often the rule fires; 0 means no limit. A rule with
	// Times: n and no Prob fails the next n matching requests.
	Times int
	// Delay is waited before the action (for Forward, the whole fault).
	Delay time.Duration
	// Gate, if set, holds the request (after Delay) until it is closed:
	// a test lets a held write land when it chooses, e.g. once the
	// writer's lease has moved to another process. A request whose client
	// goes away while held is dropped, never forwarded.
	Gate <-chan struct{}
}

// RuleID identifies a rule added to a Proxy.
type RuleID int

type rule struct {
	Rule
	id      RuleID
	kinds   [numKinds]bool
	fired   int
	removed bool
}

// Proxy is an HTTP reverse proxy in front of an S3 endpoint (MinIO) that
// injects faults into chosen requests. It forwards every request byte for
// byte, Host header included, so SigV4 signatures made for the proxy's
// address verify at MinIO. Its methods are safe for concurrent use, also
// while requests are in flight.
type Proxy struct {
	srv       *httptest.Server
	ln        *switchListener
	upstream  *url.URL
	transport *http.Transport
	rp        *httputil.ReverseProxy
	closing   chan struct{}
	closeOnce sync.Once
	seed      uint64
	reqID     atomic.Uint64

	mu       sync.Mutex
	rng      *rand.Rand
	rules    []*rule
	all      map[RuleID]*rule // every rule ever added, for Fired
	nextID   RuleID
	requests [numKinds]int64
	faults   [numKinds][numActions]int64
	statuses [numKinds]map[int]int64 // upstream replies by status
	replies  []Reply                 // the audit log of object writes
	seq      int64                   // of the last Reply
}

// EnvSeed names the environment variable that fixes the seed of New.
const EnvSeed = "FAULTPROXY_SEED"

// New starts a proxy on 127.0.0.1 in front of upstream (such as
// "http://127.0.0.1:9000") and closes it when t ends. The random seed is
// $FAULTPROXY_SEED if set, else the clock; it is logged so a run can be
// repeated.
func New(t testing.TB, upstream string) *Proxy {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(EnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("faultproxy: %s=%q: %v", EnvSeed, s, err)
		}
		seed = v
	}
	return NewSeeded(t, upstream, seed)
}

// NewSeeded is New with a given seed.
func NewSeeded(t testing.TB, upstream string, seed uint64) *Proxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		t.Fatalf("faultproxy: upstream %q is not an http(s) URL (err: %v)", upstream, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil               // never an HTTP_PROXY from the environment
	tr.DisableCompression = true // do not add Accept-Encoding or decode bodies
	tr.MaxIdleConnsPerHost = 64
	p := &Proxy{
		upstream:  u,
		transport: tr,
		closing:   make(chan struct{}),
		all:       map[RuleID]*rule{},
		seed:      seed,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Only where the request goes: Out.Host stays the client's
			// Host (signed by SigV4); no X-Forwarded-* headers are added.
			pr.Out.URL.Scheme = u.Scheme
			pr.Out.URL.Host = u.Host
		},
		Transport: tr,
		ModifyResponse: func(resp *http.Response) error {
			return p.record(resp.Request, resp, false)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// MinIO down (killed by a test) or the client went away.
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := newSwitchListener()
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	p.ln = ln
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Listener.Close()
	p.srv.Listener = ln
	p.srv.Start()
	t.Logf("faultproxy: %s -> %s, seed %d (set %s=%d to repeat)", p.srv.URL, upstream, seed, EnvSeed, seed)
	t.Cleanup(p.Close)
	return p
}

// URL returns the proxy's base URL, "http://127.0.0.1:PORT": the endpoint
// to give the S3 client.
func (p *Proxy) URL() string { return p.srv.URL }

// Seed returns the seed of the random generator behind Rule.Prob.
func (p *Proxy) Seed() uint64 { return p.seed }

// Close stops the proxy: it cuts delays short, waits for requests in
// flight, and closes connections. It is idempotent.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		close(p.closing)
		p.srv.CloseClientConnections()
		p.srv.Close()
		p.transport.CloseIdleConnections()
	})
}

// PeekBody returns the body of r, an incoming request, and puts it back for
// the rules after and for forwarding (a Match func may call it). The body
// is as the client sent it: an aws-chunked body keeps its chunk framing.
func PeekBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, err
}

// Add adds a rule after the existing ones and returns its id.
func (p *Proxy) Add(r Rule) RuleID { return p.add(r, false) }

// AddFirst adds a rule before the existing ones (it is tried first) and
// returns its id.
func (p *Proxy) AddFirst(r Rule) RuleID { return p.add(r, true) }

func (p *Proxy) add(r Rule, first bool) RuleID {
	if r.Action < 0 || r.Action >= numActions {
		panic(fmt.Sprintf("faultproxy: invalid action %d", r.Action))
	}
	ru := &rule{Rule: r}
	for _, k := range r.Kinds {
		if k < 0 || k >= numKinds {
			panic(fmt.Sprintf("faultproxy: invalid kind %d", k))
		}
		ru.kinds[k] = true
	}
	if len(r.Kinds) == 0 {
		for k := range ru.kinds {
			ru.kinds[k] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	ru.id = p.nextID
	if first {
		p.rules = append([]*rule{ru}, p.rules...)
	} else {
		p.rules = append(p.rules, ru)
	}
	p.all[ru.id] = ru
	return ru.id
}

// FailNext makes the next n requests of kind k fail with a.
func (p *Proxy) FailNext(k Kind, a Action, n int) RuleID {
	return p.Add(Rule{Kinds: []Kind{k}, Action: a, Times: n})
}

// FailRandomly makes a share prob of the requests of the given kinds (all
// kinds if none) fail with a, with no limit.
func (p *Proxy) FailRandomly(prob float64, a Action, kinds ...Kind) RuleID {
	return p.Add(Rule{Kinds: kinds, Action: a, Prob: prob})
}

// Remove removes a rule; requests already being faulted by it go on.
func (p *Proxy) Remove(id RuleID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.rules {
		if r.id == id {
			r.removed = true
			p.rules = append(p.rules[:i:i], p.rules[i+1:]...)
			return
		}
	}
}

// Clear removes every rule: from now on every request is forwarded.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		r.removed = true
	}
	p.rules = nil
}

// Fired returns how often a rule has fired (also after Remove).
func (p *Proxy) Fired(id RuleID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.all[id]; r != nil {
		return r.fired
	}
	return 0
}

// Requests returns how many requests of kind k the proxy received, faulted
// or not.
func (p *Proxy) Requests(k Kind) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[k]
}

// Injected returns how many requests of kind k got a fault (any action,
// Forward with a delay included).
func (p *Proxy) Injected(k Kind) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, c := range p.faults[k] {
		n += c
	}
	return n
}

// InjectedAction returns how many requests of kind k got action a.
func (p *Proxy) InjectedAction(k Kind, a Action) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[k][a]
}

// TotalInjected returns how many faults were injected in all.
func (p *Proxy) TotalInjected() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for k := range p.faults {
		for _, c := range p.faults[k] {
			n += c
		}
	}
	return n
}

// ResetCounts sets every request, fault and status count to zero (not
// the rules' Fired counts, nor the log of Replies).
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = [numKinds]int64{}
	p.faults = [numKinds][numActions]int64{}
	p.statuses = [numKinds]map[int]int64{}
}

// Stats returns the counts as a table, one line per kind seen: requests,
// then each action injected, for test logs.
func (p *Proxy) Stats() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for k := range numKinds {
		if p.requests[k] == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-24s requests=%d", k, p.requests[k])
		for a := range numActions {
			if n := p.faults[k][a]; n > 0 {
				fmt.Fprintf(&b, " %s=%d", a, n)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// decide counts the request and returns the rule that fires on it, if any.
func (p *Proxy) decide(r *http.Request, k Kind) (Rule, bool) {
	p.mu.Lock()
	p.requests[k]++
	rules := append([]*rule(nil), p.rules...)
	p.mu.Unlock()
	for _, ru := range rules {
		if !ru.kinds[k] || (ru.Match != nil && !ru.Match(r)) {
			continue
		}
		p.mu.Lock()
		fire := !ru.removed && (ru.Times == 0 || ru.fired < ru.Times) &&
			(ru.Prob <= 0 || ru.Prob >= 1 || p.rng.Float64() < ru.Prob)
		if fire {
			ru.fired++
			p.faults[k][ru.Action]++
		}
		p.mu.Unlock()
		if fire {
			return ru.Rule, true
		}
	}
	return Rule{}, false
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	k := Classify(r)
	ru, ok := p.decide(r, k)
	if !ok {
		p.rp.ServeHTTP(w, r)
		return
	}
	if ru.Delay > 0 {
		t := time.NewTimer(ru.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-p.closing:
			t.Stop()
			reset(w)
			return
		}
	}
	if ru.Gate != nil {
		select {
		case <-ru.Gate:
		case <-r.Context().Done():
			return
		case <-p.closing:
			reset(w)
			return
		}
	}
	switch ru.Action {
	case Forward:
		p.rp.ServeHTTP(w, r)
	case SlowDown:
		writeError(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.", p.reqID.Add(1))
	case InternalError:
		writeError(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.", p.reqID.Add(1))
	case ResetBefore:
		reset(w)
	case ResetAfter:
		p.forward(r)
		reset(w)
	case Conflict, ConflictAfter:
		if ru.Action == ConflictAfter {
			p.forward(r)
		}
		writeError(w, r, http.StatusConflict, "ConditionalRequestConflict",
			"A conflicting operation occurred. If using PutObject you can retry the request.", p.reqID.Add(1))
	}
}

// forward sends r to the upstream and reads the whole reply (so MinIO has
// finished the operation), recording and discarding it.
func (p *Proxy) forward(r *http.Request) {
	// Detached from the client: the reset must not cancel the operation.
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	out.URL.Scheme = p.upstream.Scheme
	out.URL.Host = p.upstream.Host
	if r.ContentLength == 0 {
		out.Body = nil
	}
	out.Header.Del("Connection")
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		return
	}
	_ = p.record(r, resp, true)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// writeError answers with an S3 XML error. The request body is read first,
// so the client gets the error and not a write failure.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string, n uint64) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := fmt.Sprintf("FAULTPROXY%08d", n)
	body := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"+
		"<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>%s</RequestId></Error>",
		code, msg, xmlEscape(r.URL.Path), id)
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amz-Request-Id", id)
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// reset closes the client's connection with a TCP RST, before any byte of
// a reply.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}
