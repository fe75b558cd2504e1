package mysqlxa

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// FormatID is the XA format id of every branch this package creates
// ("FSXA" in ASCII). XA format ids are at most 2147483647.
const FormatID = 0x46535841

const (
	gtridPrefix = "fsxa1"
	maxXidPart  = 64 // bytes, for gtrid and bqual alike
	nonceLen    = 12 // hex digits
)

// Xid identifies one XA branch of a filesink MySQL sink. Its gtrid is
// "fsxa1:JOB:SINK:SUBTASK" and its bqual "CHECKPOINT:NONCE:CONNID", both
// ASCII and at most 64 bytes; the format id is FormatID.
type Xid struct {
	Job     string // job id
	Sink    string // sink id within the job (default: the table name)
	Subtask int    // sink subtask
	// Checkpoint is the checkpoint whose phase 1 prepares the branch.
	Checkpoint uint64
	// Nonce is random per run of the sink (hex), so that a branch of a
	// crashed run never has the xid of a later one.
	Nonce string
	// ConnID is the server's id of the session that started the branch:
	// the session that holds it until it disconnects (MariaDB), which may
	// be killed when it outlives its process.
	ConnID uint64
}

// Gtrid returns the global transaction id part.
func (x Xid) Gtrid() string {
	return gtridPrefix + ":" + x.Job + ":" + x.Sink + ":" + strconv.Itoa(x.Subtask)
}

// Bqual returns the branch qualifier part.
func (x Xid) Bqual() string {
	return strconv.FormatUint(x.Checkpoint, 10) + ":" + x.Nonce + ":" + strconv.FormatUint(x.ConnID, 10)
}

// SQL returns the xid as XA statements take it: X'gtrid',X'bqual',format.
func (x Xid) SQL() string {
	return "X'" + hex.EncodeToString([]byte(x.Gtrid())) + "',X'" + hex.EncodeToString([]byte(x.Bqual())) + "'," + strconv.Itoa(FormatID)
}

// String returns "gtrid/bqual", for messages.
func (x Xid) String() string { return x.Gtrid() + "/" + x.Bqual() }

// validID reports whether s may be a job or sink id: 1 to 64 bytes of
// ASCII letters, digits and ._-/
func validID(s string) bool {
	if s == "" || len(s) > maxXidPart {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

// check returns an error when the xid cannot be represented.
func (x Xid) check() error {
	switch {
	case !validID(x.Job):
		return fmt.Errorf("job id %q must be 1 to 64 ASCII letters, digits or ._-/", x.Job)
	case !validID(x.Sink):
		return fmt.Errorf("sink id %q must be 1 to 64 ASCII letters, digits or ._-/", x.Sink)
	case x.Subtask < 0:
		return fmt.Errorf("negative subtask %d", x.Subtask)
	case len(x.Gtrid()) > maxXidPart:
		return fmt.Errorf("gtrid %q is longer than %d bytes: use a shorter job or sink id", x.Gtrid(), maxXidPart)
	case len(x.Bqual()) > maxXidPart:
		return fmt.Errorf("bqual %q is longer than %d bytes", x.Bqual(), maxXidPart)
	}
	for _, c := range x.Nonce {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("nonce %q is not lowercase hex", x.Nonce)
		}
	}
	return nil
}

// ParseXid decodes the parts of a branch as XA RECOVER lists them. ok is
// false for a branch that no filesink MySQL sink created.
func ParseXid(formatID int64, gtrid, bqual []byte) (x Xid, ok bool) {
	if formatID != FormatID {
		return Xid{}, false
	}
	g := strings.Split(string(gtrid), ":")
	if len(g) != 4 || g[0] != gtridPrefix {
		return Xid{}, false
	}
	sub, err := strconv.Atoi(g[3])
	if err != nil || strconv.Itoa(sub) != g[3] {
		return Xid{}, false
	}
	b := strings.Split(string(bqual), ":")
	if len(b) != 3 {
		return Xid{}, false
	}
	ck, err1 := strconv.ParseUint(b[0], 10, 64)
	conn, err2 := strconv.ParseUint(b[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Xid{}, false
	}
	x = Xid{Job: g[1], Sink: g[2], Subtask: sub, Checkpoint: ck, Nonce: b[1], ConnID: conn}
	if x.check() != nil || x.Gtrid() != string(gtrid) || x.Bqual() != string(bqual) {
		return Xid{}, false
	}
	return x, true
}

// ParseXidString parses the form String returns ("gtrid/bqual"), as the CLI
// takes it.
func ParseXidString(s string) (Xid, error) {
	g, b, found := strings.Cut(s, "/")
	// The sink id may contain '/': the bqual is after the last one.
	if i := strings.LastIndexByte(s, '/'); found && i >= 0 {
		g, b = s[:i], s[i+1:]
	}
	x, ok := ParseXid(FormatID, []byte(g), []byte(b))
	if !found || !ok {
		return Xid{}, fmt.Errorf("mysqlxa: %q is not a filesink xid (want %s:JOB:SINK:SUBTASK/CHECKPOINT:NONCE:CONNID)", s, gtridPrefix)
	}
	return x, nil
}
