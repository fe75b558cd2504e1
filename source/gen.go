package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Generator defaults.
const (
	// DefaultGenSize is the default length of a generated line in bytes.
	DefaultGenSize = 100
	// DefaultGenKeys is the default number of distinct keys.
	DefaultGenKeys = 16
	// DefaultGenStep is the default event-time step between records.
	DefaultGenStep = time.Millisecond
	// MaxGenSize is the largest line size the generator accepts.
	MaxGenSize = 16 << 20
)

// defaultGenStart is the default event time of record 0.
func defaultGenStart() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// GenConfig configures the generator. The zero value of Size, Keys, Start
// and Step selects its default.
type GenConfig struct {
	// Count is the number of records, at least 0.
	Count int64
	// Seed selects the payloads. The same Count, Seed, Size, Keys, Start
	// and Step give the same records, byte for byte, on every run and every
	// Go version (the generator uses its own SplitMix64, not math/rand).
	Seed uint64
	// Size is the length of each line in bytes (DefaultGenSize if 0): the
	// payload is sized so that the line is exactly Size bytes, unless the
	// other fields alone are longer, in which case the payload is empty.
	// At most MaxGenSize.
	Size int
	// Keys is the number of distinct keys (DefaultGenKeys if 0): record i
	// has key "k-(i mod Keys)".
	Keys int
	// Start is the event time of record 0 (2026-01-01T00:00:00Z if zero).
	// Event times are written in UTC.
	Start time.Time
	// Step is the event-time step between records (DefaultGenStep if 0);
	// it may be negative.
	Step time.Duration
}

// withDefaults fills in defaults and validates c.
func (c GenConfig) withDefaults() (GenConfig, error) {
	if c.Size == 0 {
		c.Size = DefaultGenSize
	}
	if c.Keys == 0 {
		c.Keys = DefaultGenKeys
	}
	if c.Start.IsZero() {
		c.Start = defaultGenStart()
	}
	if c.Step == 0 {
		c.Step = DefaultGenStep
	}
	c.Start = c.Start.UTC()
	var errs []error
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("count %d: must be at least 0", c.Count))
	}
	if c.Size < 0 || c.Size > MaxGenSize {
		errs = append(errs, fmt.Errorf("size %d: must be between 1 and %d", c.Size, MaxGenSize))
	}
	if c.Keys < 0 {
		errs = append(errs, fmt.Errorf("keys %d: must be at least 1", c.Keys))
	}
	if y := c.Start.Year(); y < 0 || y > 9999 {
		errs = append(errs, fmt.Errorf("start %v: year must be between 0 and 9999", c.Start))
	}
	if c.Count > 0 {
		// start + (Count-1)*Step must fit: the offset in nanoseconds in an
		// int64 (with room for Start's nanoseconds) and the year in 0..9999.
		last := c.Count - 1
		if c.Step == math.MinInt64 || (last > 0 && absDur(c.Step) > (math.MaxInt64-1e9)/time.Duration(last)) {
			errs = append(errs, fmt.Errorf("count %d and step %v: event times overflow", c.Count, c.Step))
		} else if y := c.Start.Add(time.Duration(last) * c.Step).Year(); y < 0 || y > 9999 {
			errs = append(errs, fmt.Errorf("count %d and step %v: the last event time is in year %d, outside 0..9999", c.Count, c.Step, y))
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("source: generator: %w", errors.Join(errs...))
	}
	return c, nil
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Generator is the deterministic generator source: Count records, record i
// (0-based) being the JSON object
//
//	{"id":i,"key":"k-(i mod Keys)","ts":"START+i*STEP","payload":"..."}
//
// with ts in RFC 3339, UTC, with as many fractional-second digits (0, 3, 6
// or 9) as Start and Step need, and a payload of pseudo-random lowercase
// letters chosen by Seed and i that makes the line Size bytes long. The ids
// are unique. It is replayable: its position is {"next": i}, the id of the
// next record to return. Origins are "gen:ID".
type Generator struct {
	cfg     GenConfig
	next    int64
	buf     []byte // the line being returned; reused
	letters []byte // random letters; payloads are windows of it
	windows uint64 // number of distinct window starts
	sec     int64  // Start, in Unix seconds
	nsec    int64  // Start's nanoseconds
	digits  int    // fractional-second digits of ts
	fracDiv int64  // 10^(9-digits)
	tsSec   int64  // Unix second of tsText
	tsText  []byte // "YYYY-MM-DDTHH:MM:SS" of tsSec
	closed  bool
	desc    string
}

type genPos struct {
	Next *int64 `json:"next"`
}

// genWindows is the number of distinct payload starts in the letter buffer.
const genWindows = 64 << 10

// NewGenerator returns a generator source for cfg, resuming at pos (nil or
// JSON null: from record 0). A pos whose "next" exceeds cfg.Count is an
// *InputChangedError.
func NewGenerator(cfg GenConfig, pos json.RawMessage) (*Generator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, sec: cfg.Start.Unix(), nsec: int64(cfg.Start.Nanosecond())}
	switch ns, st := g.nsec, int64(absDur(cfg.Step)); {
	case ns%1e9 == 0 && st%1e9 == 0:
		g.digits = 0
	case ns%1e6 == 0 && st%1e6 == 0:
		g.digits = 3
	case ns%1e3 == 0 && st%1e3 == 0:
		g.digits = 6
	default:
		g.digits = 9
	}
	g.fracDiv = 1
	for k := g.digits; k < 9; k++ {
		g.fracDiv *= 10
	}
	// Payloads are at most Size bytes; a window may start anywhere in the
	// first genWindows bytes.
	g.windows = genWindows
	g.letters = make([]byte, genWindows+cfg.Size)
	rng := cfg.Seed
	for i := 0; i < len(g.letters); i += 8 {
		v := splitmix64(&rng)
		for j := 0; j < 8 && i+j < len(g.letters); j++ {
			g.letters[i+j] = 'a' + byte((uint32(byte(v>>(8*j)))*26)>>8)
		}
	}
	g.buf = make([]byte, 0, cfg.Size+128)
	g.desc = fmt.Sprintf("gen count=%d seed=%d size=%d keys=%d start=%s step=%v",
		cfg.Count, cfg.Seed, cfg.Size, cfg.Keys, cfg.Start.Format(time.RFC3339Nano), cfg.Step)
	if !isNullPosition(pos) {
		var p genPos
		if err := decodePosition("generator", pos, &p); err != nil {
			return nil, err
		}
		switch {
		case p.Next == nil:
			return nil, fmt.Errorf(`%w: generator position %s: want "next"`, ErrBadPosition, truncate(pos, 200))
		case *p.Next < 0:
			return nil, fmt.Errorf(`%w: generator position %s: negative "next"`, ErrBadPosition, truncate(pos, 200))
		case *p.Next > cfg.Count:
			return nil, &InputChangedError{Input: "gen", Reason: fmt.Sprintf("the checkpoint is at record %d but count is %d", *p.Next, cfg.Count)}
		}
		g.next = *p.Next
		g.desc += fmt.Sprintf(", resuming at record %d", g.next)
	}
	return g, nil
}

// splitmix64 advances *state and returns the next SplitMix64 output.
func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Config returns the generator's configuration with defaults filled in.
func (g *Generator) Config() GenConfig { return g.cfg }

// Next implements Source. It never blocks and does not allocate.
func (g *Generator) Next(ctx context.Context) (Record, error) {
	if g.closed {
		return Record{}, ErrClosed
	}
	if g.next >= g.cfg.Count {
		return Record{}, io.EOF
	}
	i := g.next
	b := append(g.buf[:0], `{"id":`...)
	b = strconv.AppendInt(b, i, 10)
	b = append(b, `,"key":"k-`...)
	b = strconv.AppendInt(b, i%int64(g.cfg.Keys), 10)
	b = append(b, `","ts":"`...)
	b = g.appendTS(b, i)
	b = append(b, `","payload":"`...)
	if n := g.cfg.Size - len(b) - len(`"}`); n > 0 {
		s := g.cfg.Seed ^ (uint64(i) * 0xd1342543de82ef95)
		off := splitmix64(&s) % g.windows
		b = append(b, g.letters[off:off+uint64(n)]...)
	}
	b = append(b, `"}`...)
	g.buf = b
	g.next++
	return Record{Value: b, Origin: Origin{Name: "gen", Num: i}}, nil
}

// appendTS appends the event time of record i. The text up to the seconds
// is cached, so consecutive records in the same second only format their
// fraction.
func (g *Generator) appendTS(b []byte, i int64) []byte {
	ns := g.nsec + i*int64(g.cfg.Step) // validated not to overflow
	sec := g.sec + floorDiv(ns, 1e9)
	frac := ns - floorDiv(ns, 1e9)*1e9
	if sec != g.tsSec || g.tsText == nil {
		day := floorDiv(sec, 86400)
		t := time.Unix(day*86400, 0).UTC().AppendFormat(g.tsText[:0], "2006-01-02T")
		sod := sec - day*86400
		t = append2(t, sod/3600)
		t = append(t, ':')
		t = append2(t, sod/60%60)
		t = append(t, ':')
		t = append2(t, sod%60)
		g.tsSec, g.tsText = sec, t
	}
	b = append(b, g.tsText...)
	if g.digits > 0 {
		var d [10]byte
		d[0] = '.'
		v := frac / g.fracDiv
		k := g.digits
		for ; k >= 2; k -= 2 {
			q := v / 100
			r := 2 * (v - q*100)
			d[k-1], d[k] = digitPairs[r], digitPairs[r+1]
			v = q
		}
		if k == 1 {
			d[1] = '0' + byte(v)
		}
		b = append(b, d[:g.digits+1]...)
	}
	return append(b, 'Z')
}

// digitPairs holds "00" to "99".
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

func append2(b []byte, v int64) []byte {
	return append(b, '0'+byte(v/10), '0'+byte(v%10))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Position implements Source: {"next": i}, the id of the next record. It
// may be called after Close.
func (g *Generator) Position() (json.RawMessage, error) {
	b := append(make([]byte, 0, 32), `{"next":`...)
	b = strconv.AppendInt(b, g.next, 10)
	return append(b, '}'), nil
}

// Replayable implements Source: it returns true.
func (g *Generator) Replayable() bool { return true }

// Describe implements Source, e.g. "gen count=1000 seed=1 size=100 ...".
func (g *Generator) Describe() string { return g.desc }

// Close implements Source.
func (g *Generator) Close() error {
	g.closed = true
	return nil
}

// genParams are the query parameters of a gen:// URI.
var genParams = []string{"count", "seed", "size", "keys", "start", "step"}

// ParseGenQuery parses the query of a gen:// URI
// ("count=N&seed=S&size=B&keys=K&start=RFC3339&step=DURATION") into a
// GenConfig. count is required; the others default as in GenConfig.
// Unknown or repeated parameters are errors.
func ParseGenQuery(query string) (GenConfig, error) {
	var c GenConfig
	q, err := url.ParseQuery(query)
	if err != nil {
		return c, fmt.Errorf("%w: gen query %q: %v", ErrBadURI, query, err)
	}
	var errs []error
	for k, v := range q {
		if !slices.Contains(genParams, k) {
			errs = append(errs, fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(genParams, ", ")))
		} else if len(v) > 1 {
			errs = append(errs, fmt.Errorf("parameter %q given %d times", k, len(v)))
		}
	}
	get := func(k string) (string, bool) {
		v, ok := q[k]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	if v, ok := get("count"); !ok {
		errs = append(errs, errors.New("count is required (gen://?count=N)"))
	} else if c.Count, err = strconv.ParseInt(v, 10, 64); err != nil || c.Count < 0 {
		errs = append(errs, fmt.Errorf("count %q: want an integer >= 0", v))
	}
	if v, ok := get("seed"); ok {
		if c.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			errs = append(errs, fmt.Errorf("seed %q: want an unsigned integer", v))
		}
	}
	if v, ok := get("size"); ok {
		if c.Size, err = strconv.Atoi(v); err != nil || c.Size < 1 {
			errs = append(errs, fmt.Errorf("size %q: want an integer >= 1", v))
		}
	}
	if v, ok := get("keys"); ok {
		if c.Keys, err = strconv.Atoi(v); err != nil || c.Keys < 1 {
			errs = append(errs, fmt.Errorf("keys %q: want an integer >= 1", v))
		}
	}
	if v, ok := get("start"); ok {
		if c.Start, err = time.Parse(time.RFC3339Nano, v); err != nil {
			errs = append(errs, fmt.Errorf("start %q: want an RFC 3339 time such as 2026-01-01T00:00:00Z", v))
		}
	}
	if v, ok := get("step"); ok {
		if c.Step, err = time.ParseDuration(v); err != nil || c.Step == 0 {
			errs = append(errs, fmt.Errorf("step %q: want a non-zero Go duration such as 1ms or -1s", v))
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return c, fmt.Errorf("%w: gen query %q: %w", ErrBadURI, query, errors.Join(errs...))
	}
	return c, nil
}
