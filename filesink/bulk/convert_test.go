package bulk

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// exactFloat64 agrees with strconv.ParseFloat, bit for bit, on every
// number it accepts, and accepts the common ones.
func TestExactFloat64(t *testing.T) {
	check := func(s string) bool {
		t.Helper()
		want, err := strconv.ParseFloat(s, 64)
		got, ok := exactFloat64([]byte(s))
		if !ok {
			return false
		}
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("%s: %v (%x), strconv %v (%x, %v)", s, got, math.Float64bits(got), want, math.Float64bits(want), err)
		}
		return true
	}
	for _, s := range []string{"0", "-0", "0.0", "-0.0", "1", "-1", "0.1", "0.3", "1.5", "123.456", "-99.99", "1e22", "1e23",
		"1e-22", "1e-23", "9007199254740992", "9007199254740993", "0.000001", "1E5", "1e+5", "2.5E-3", "0e999", "-0e-999",
		"123456789012345678", "1234567890123456789", "12345678901234567890", "0.0000000000000000000000001", "4.35e-5",
		"17976931348623157e292", "1.7976931348623157e308", "5e-324", "100000000000000000000000", "0.1e1", "10e-1"} {
		check(s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	const n = 200000
	for i := 0; i < n; i++ {
		var f float64
		switch i % 4 {
		case 0:
			f = rng.Float64() * 1000
		case 1:
			f = float64(rng.IntN(1e6)) / 100
		case 2:
			f = math.Float64frombits(rng.Uint64())
		default:
			f = (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(40)-20))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		for _, s := range []string{strconv.FormatFloat(f, 'f', -1, 64), strconv.FormatFloat(f, 'e', -1, 64), strconv.FormatFloat(f, 'g', rng.IntN(17)+1, 64)} {
			if check(s) {
				accepted++
			}
		}
	}
	if accepted < n/2 {
		t.Errorf("the fast path took %d of %d numbers", accepted, 3*n)
	}
}

// Floats take the strings "NaN", "Infinity" and "-Infinity" (Avro's JSON
// spelling), in lists too; any other string is the wrong type.
func TestSpecialFloats(t *testing.T) {
	s, err := ParseSchema([]byte(`{"fields":[{"name":"f","type":"float32"},{"name":"d","type":"list<float64>"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := newConverter(s, memory.DefaultAllocator)
	defer c.release()
	if err := c.add([]byte(`{"f":"NaN","d":["Infinity","-Infinity",1.5]}`)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"f":"nan"}`, `{"d":["1.5"]}`} {
		var fe *FieldError
		if err := c.add([]byte(bad)); !errors.As(err, &fe) || !strings.Contains(fe.Problem, "wrong type") {
			t.Errorf("%s: %v, want a wrong type", bad, err)
		}
	}
	rec := c.record()
	defer rec.Release()
	f := rec.Column(0).(*array.Float32).Value(0)
	d := rec.Column(1).(*array.List).ListValues().(*array.Float64)
	if rec.NumRows() != 1 || !math.IsNaN(float64(f)) || !math.IsInf(d.Value(0), 1) || !math.IsInf(d.Value(1), -1) || d.Value(2) != 1.5 {
		t.Errorf("read %d rows: f %v, d %v", rec.NumRows(), f, d)
	}
}
