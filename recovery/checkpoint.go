package recovery

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"time"
)

// Checkpoint is one checkpoint record.
type Checkpoint struct {
	// ID is the checkpoint's number; IDs increase by one per checkpoint.
	ID uint64 `json:"id"`
	// Time is when the record was written (informational).
	Time time.Time `json:"time"`
	// Source is the source position after the last record of this checkpoint,
	// as written by the source; nil for a non-replayable source.
	Source json.RawMessage `json:"source,omitempty"`
	// Participants holds one entry per sink participant, in the order of the
	// coordinator's participants.
	Participants []Participant `json:"participants"`
}

// Participant is one participant's part of a checkpoint record.
type Participant struct {
	// Name identifies the participant across restarts (for example
	// "filesink/0" for subtask 0).
	Name string `json:"name"`
	// State is the participant's snapshot (for example in-progress part
	// files and their durable lengths).
	State json.RawMessage `json:"state,omitempty"`
	// Pending lists the committables decided by this or an earlier
	// checkpoint and not known to be published.
	Pending []Committable `json:"pending,omitempty"`
}

// Committable is one unit of phase-2 work, opaque to this package.
type Committable struct {
	// Checkpoint is the checkpoint whose phase 1 produced it.
	Checkpoint uint64 `json:"checkpoint"`
	// Data is the backend's description of what to publish.
	Data json.RawMessage `json:"data"`
}

const (
	magic = "FSINKCKP"
	// FormatVersion is the version Encode writes.
	FormatVersion = 1
	headerLen     = len(magic) + 2 + 2 + 4 + 4
	maxPayload    = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the binary form of c: the header (magic "FSINKCKP", version
// uint16, flags uint16, payload length uint32, CRC-32C uint32, big endian)
// followed by the JSON payload.
func Encode(c *Checkpoint) ([]byte, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint %d: %w", c.ID, err)
	}
	buf := make([]byte, headerLen, headerLen+len(payload))
	copy(buf, magic)
	binary.BigEndian.PutUint16(buf[8:], FormatVersion)
	binary.BigEndian.PutUint16(buf[10:], 0)
	binary.BigEndian.PutUint32(buf[12:], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[16:], crc32.Checksum(payload, castagnoli))
	return append(buf, payload...), nil
}

// Decode parses a record read from file (used in errors only). Any defect
// gives a *CorruptError.
func Decode(file string, b []byte) (*Checkpoint, error) {
	bad := func(format string, args ...any) error {
		return &CorruptError{File: file, Reason: fmt.Sprintf(format, args...), Err: ErrCorruptCheckpoint}
	}
	if len(b) < headerLen {
		return nil, bad("truncated: %d bytes, header needs %d", len(b), headerLen)
	}
	if !bytes.Equal(b[:len(magic)], []byte(magic)) {
		return nil, bad("not a checkpoint record (bad magic %q)", b[:len(magic)])
	}
	if v := binary.BigEndian.Uint16(b[8:]); v != FormatVersion {
		return nil, &CorruptError{File: file, Reason: fmt.Sprintf("format version %d, this build reads version %d", v, FormatVersion), Err: ErrUnsupportedVersion}
	}
	if f := binary.BigEndian.Uint16(b[10:]); f != 0 {
		return nil, bad("unknown flags %#x", f)
	}
	n := binary.BigEndian.Uint32(b[12:])
	payload := b[headerLen:]
	if n > maxPayload || uint32(len(payload)) != n {
		return nil, bad("truncated or padded: payload is %d bytes, header says %d", len(payload), n)
	}
	if sum := crc32.Checksum(payload, castagnoli); sum != binary.BigEndian.Uint32(b[16:]) {
		return nil, bad("checksum mismatch: computed %08x, recorded %08x", sum, binary.BigEndian.Uint32(b[16:]))
	}
	var c Checkpoint
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, bad("payload: %v", err)
	}
	if dec.More() {
		return nil, bad("payload: trailing data")
	}
	if c.ID == 0 {
		return nil, bad("checkpoint id 0")
	}
	return &c, nil
}

func putU32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
