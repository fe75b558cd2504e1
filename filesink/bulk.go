package filesink

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
)

// BulkFormat makes the writers of a bulk (columnar) format, such as Parquet
// or Arrow IPC: a bulk file is encoded whole, buffering rows into row
// groups and writing a footer when it is closed. A footer cannot be
// resumed, so a Writer with a bulk format rolls every part at every
// checkpoint (whatever the rolling policy says), besides on size and time.
//
// Implementations live outside this package (filesink/bulk); the Writer
// integration is WithBulkFormat.
type BulkFormat interface {
	// NewWriter starts a bulk file whose bytes go to w, in order. It must
	// not retain w after Close.
	NewWriter(w io.Writer) (BulkWriter, error)
	// Extension is the part file suffix, such as ".parquet" or ".arrow".
	Extension() string
}

// PendingSizer is implemented by bulk writers that can estimate how many
// bytes the rows they hold will add to their file once encoded. A Writer
// counts Pending, instead of Buffered (memory, often twice the encoded
// size or more), towards a bulk part's size for the rolling policy, so
// that parts come out near the policy's part size; Buffered still counts
// against the buffer budget. Pending is called on the goroutine that
// calls the BulkWriter's methods.
type PendingSizer interface {
	Pending() int64
}

// Lender is implemented by the io.Writer a Writer gives each BulkWriter
// (BulkFormat.NewWriter's w). A BulkWriter that encodes on a goroutine of
// its own can borrow the part file and write the encoded bytes from that
// goroutine, instead of handing them to the goroutine that calls its
// methods, which would copy them into the Writer's buffers for the Writer's
// I/O goroutine: the bytes are copied once less, and the calling goroutine
// (usually the busiest) spends no time on them.
type Lender interface {
	// Lend returns a writer of the part file that the BulkWriter may use
	// until Return from any goroutine (another than the caller's, or the
	// caller's while it waits for the other), one call at a time, the
	// calls ordered by synchronization; or nil when the part cannot be
	// lent (its file is not open yet): the BulkWriter then goes on
	// writing to w. Bytes written to w before Lend come first in the file.
	// Until Return the BulkWriter must not call w's Write. Lend and Return
	// are called on the goroutine that calls the BulkWriter's methods, and
	// Return only once the lent writer's last call has returned (after a
	// synchronization that orders them, such as a channel receive).
	//
	// A write to the lent writer fails once the Writer was closed (Close
	// releases the part file without waiting for the BulkWriter).
	Lend() io.Writer
	// Return ends the loan: w may be written again.
	Return()
}

// BatchWriter is implemented by bulk writers that take many rows at once
// as an arrow.Record of their schema (package bulk's), for
// Writer.WriteBatch: the rows skip the per-record parsing of Add.
type BatchWriter interface {
	// AddBatch appends the rows of batch and returns how many there were.
	// A batch that does not fit the format (or nil) is an error wrapping
	// source.ErrBadRecord and adds nothing.
	AddBatch(batch arrow.Record) (rows int64, err error)
}

// BulkWriter encodes one bulk file. Not safe for concurrent use.
type BulkWriter interface {
	// Add appends one record (for the CLI, one JSON line). A record that
	// does not fit the format's schema is an error wrapping source.ErrBadRecord
	// that says which field and why (the Writer adds the record's origin);
	// the writer stays usable and the record is not added.
	Add(record []byte) error
	// Buffered is the number of bytes the writer holds in memory (the row
	// group being built, and encoded pages not yet written): the Writer
	// counts it against its buffer budget.
	Buffered() int64
	// Flush writes the buffered rows to w as a complete row group (or
	// record batch), releasing their memory. The Writer calls it when the
	// budget needs the memory back.
	Flush() error
	// Close writes the remaining rows and the footer. After a nil error the
	// bytes written to w are one complete, readable file.
	Close() error
}
