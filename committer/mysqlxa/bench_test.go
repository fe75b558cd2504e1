package mysqlxa_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/source"
)

// Benchmarks compare the XA sink with its limit, measured in the same run
// against the same server and table shape: plain multi-row INSERTs of the
// same batch size in local transactions of one checkpoint's size, from
// ready-made values (no JSON). Compare rows/s: XA should reach at least 80%
// of plain.
const (
	benchBatch      = 500
	benchCheckpoint = 10000 // rows per checkpoint / transaction
)

func benchTable(b *testing.B) (*mariadbtest.Server, *sql.DB, string) {
	srv := mariadbtest.Shared(b)
	dbName := srv.NewDatabase(b)
	db := srv.Open(b, dbName).DB
	if _, err := db.Exec(`CREATE TABLE bench (
		k VARCHAR(64) NOT NULL PRIMARY KEY,
		n BIGINT NOT NULL,
		amount DECIMAL(20,2) NOT NULL,
		note VARCHAR(100) NULL
	) ENGINE=InnoDB`); err != nil {
		b.Fatal(err)
	}
	return srv, db, dbName
}

func reportRows(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkXASink(b *testing.B) {
	_, db, _ := benchTable(b)
	ctx := context.Background()
	s, err := mysqlxa.New(ctx, db, "bench", mysqlxa.WithMode(mysqlxa.Insert), mysqlxa.WithJob("bench"), mysqlxa.WithBatchRows(benchBatch))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Restore(ctx, nil); err != nil {
		b.Fatal(err)
	}
	var rec []byte
	id := uint64(0)
	checkpoint := func() {
		id++
		snap, err := committer.PrepareNow(ctx, s, id, false)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range snap.Committables {
			if err := s.Commit(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for i := range b.N {
		rec = benchRecord(rec[:0], i)
		if err := s.Write(ctx, rec, source.Origin{Name: "bench", Num: int64(i)}); err != nil {
			b.Fatal(err)
		}
		if (i+1)%benchCheckpoint == 0 {
			checkpoint()
		}
	}
	checkpoint()
	b.StopTimer()
	reportRows(b)
}

func BenchmarkPlainInsert(b *testing.B) {
	_, db, _ := benchTable(b)
	ctx := context.Background()
	stmtText := "INSERT INTO bench (k, n, amount, note) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", benchBatch), ", ")
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	stmt, err := conn.PrepareContext(ctx, stmtText)
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	args := make([]any, 0, 4*benchBatch)
	inTx := 0
	begin := func() {
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			b.Fatal(err)
		}
	}
	commit := func() {
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			b.Fatal(err)
		}
		inTx = 0
	}
	send := func() {
		if len(args) == 4*benchBatch {
			_, err = stmt.ExecContext(ctx, args...)
		} else if len(args) > 0 {
			_, err = conn.ExecContext(ctx, stmtText[:strings.Index(stmtText, "VALUES ")+7]+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", len(args)/4), ", "), args...)
		}
		if err != nil {
			b.Fatal(err)
		}
		args = args[:0]
	}
	b.ResetTimer()
	begin()
	for i := range b.N {
		args = append(args, "key-"+strconv.Itoa(i), int64(i), strconv.Itoa(i%1000)+".25", "a note of some length "+strconv.Itoa(i%97))
		if len(args) == 4*benchBatch {
			send()
		}
		if inTx++; inTx == benchCheckpoint {
			send()
			commit()
			begin()
		}
	}
	send()
	commit()
	b.StopTimer()
	reportRows(b)
}

// benchRecord appends {"k":"key-I","n":I,"amount":I%1000.25,"note":"a note of some length I%97"}.
func benchRecord(b []byte, i int) []byte {
	b = append(b, `{"k":"key-`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","n":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, int64(i%1000), 10)
	b = append(b, `.25,"note":"a note of some length `...)
	b = strconv.AppendInt(b, int64(i%97), 10)
	return append(b, `"}`...)
}
