package mysqlxa_test

import (
	"strings"
	"testing"

	"github.com/filesink/filesink/committer/mysqlxa"
)

func TestXidRoundTrip(t *testing.T) {
	for _, x := range []mysqlxa.Xid{
		{Job: "j", Sink: "t", Subtask: 0, Checkpoint: 1, Nonce: "0123456789ab", ConnID: 7},
		{Job: "job-1.a/b", Sink: "db.table_x", Subtask: 123, Checkpoint: 1<<64 - 1, Nonce: "ffffffffffff", ConnID: 1<<64 - 1},
	} {
		got, ok := mysqlxa.ParseXid(mysqlxa.FormatID, []byte(x.Gtrid()), []byte(x.Bqual()))
		if !ok || got != x {
			t.Errorf("ParseXid(%s) = %+v, %v; want %+v", x, got, ok, x)
		}
		if len(x.Gtrid()) > 64 || len(x.Bqual()) > 64 {
			t.Errorf("%s: a part is longer than 64 bytes", x)
		}
		got, err := mysqlxa.ParseXidString(x.String())
		if err != nil || got != x {
			t.Errorf("ParseXidString(%s) = %+v, %v", x, got, err)
		}
		if !strings.HasPrefix(x.SQL(), "X'") || !strings.HasSuffix(x.SQL(), ",1179867201") {
			t.Errorf("SQL() = %s", x.SQL())
		}
	}
}

func TestParseXidRejectsForeign(t *testing.T) {
	for _, c := range []struct {
		format       int64
		gtrid, bqual string
	}{
		{1, "fsxa1:j:t:0", "1:0123456789ab:7"},                  // other format
		{mysqlxa.FormatID, "other:j:t:0", "1:0123456789ab:7"},   // other prefix
		{mysqlxa.FormatID, "fsxa1:j:t:00", "1:0123456789ab:7"},  // non-canonical subtask
		{mysqlxa.FormatID, "fsxa1:j:t:0", "01:0123456789ab:7"},  // non-canonical checkpoint
		{mysqlxa.FormatID, "fsxa1:j:t:0", "1:0123456789AB:7"},   // upper-case nonce
		{mysqlxa.FormatID, "fsxa1:j:t:0", "1:0123456789ab"},     // no conn id
		{mysqlxa.FormatID, "fsxa1:j:t:-1", "1:0123456789ab:7"},  // negative subtask
		{mysqlxa.FormatID, "fsxa1:j k:t:0", "1:0123456789ab:7"}, // bad job id
	} {
		if x, ok := mysqlxa.ParseXid(c.format, []byte(c.gtrid), []byte(c.bqual)); ok {
			t.Errorf("ParseXid(%d, %q, %q) accepted: %+v", c.format, c.gtrid, c.bqual, x)
		}
	}
	if mysqlxa.FormatID > 2147483647 {
		t.Fatal("format id above the XA limit")
	}
}

func FuzzParseXid(f *testing.F) {
	f.Add([]byte("fsxa1:j:t:0"), []byte("1:0123456789ab:7"))
	f.Fuzz(func(t *testing.T, g, b []byte) {
		x, ok := mysqlxa.ParseXid(mysqlxa.FormatID, g, b)
		if !ok {
			return
		}
		if x.Gtrid() != string(g) || x.Bqual() != string(b) {
			t.Fatalf("ParseXid(%q, %q) = %+v, which does not encode back", g, b, x)
		}
	})
}

func TestRedactDSN(t *testing.T) {
	got := mysqlxa.RedactDSN("user:s3cr3t@tcp(db:3306)/app")
	if strings.Contains(got, "s3cr3t") || !strings.Contains(got, "user") {
		t.Fatalf("RedactDSN = %q", got)
	}
	if got := mysqlxa.RedactDSN("user:s3cr3t@bogus(("); strings.Contains(got, "s3cr3t") {
		t.Fatalf("RedactDSN of a bad DSN = %q", got)
	}
}
