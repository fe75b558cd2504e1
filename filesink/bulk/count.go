package bulk

import (
	"bytes"
	"io"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/filesink/filesink/filesink"
)

// Counters returns the record counters of the bulk formats (.parquet,
// .arrow), which need no schema, for filesink.CountRecords.
func Counters() []filesink.RecordCounter {
	return []filesink.RecordCounter{parquetCounter{}, arrowCounter{}}
}

var (
	_ filesink.RecordCounter = (*ParquetFormat)(nil)
	_ filesink.RecordCounter = (*ArrowFormat)(nil)
)

// CountRecords implements filesink.RecordCounter: the row count of the
// file's footer.
func (f *ParquetFormat) CountRecords(r io.Reader, header bool) (int64, error) {
	return parquetCounter{}.CountRecords(r, header)
}

// CountRecords implements filesink.RecordCounter: the rows of the file's
// record batches, as its footer lists them.
func (f *ArrowFormat) CountRecords(r io.Reader, header bool) (int64, error) {
	return arrowCounter{}.CountRecords(r, header)
}

type parquetCounter struct{}

func (parquetCounter) Extension() string { return ".parquet" }

// CountRecords reads the file (a footer is at its end) and returns the
// footer's row count.
func (parquetCounter) CountRecords(r io.Reader, _ bool) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	pr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	return pr.NumRows(), nil
}

type arrowCounter struct{}

func (arrowCounter) Extension() string { return ".arrow" }

// CountRecords reads the file and sums the rows of the record batches its
// footer lists.
func (arrowCounter) CountRecords(r io.Reader, _ bool) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	fr, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	defer fr.Close()
	var n int64
	for i := 0; i < fr.NumRecords(); i++ {
		rec, err := fr.Record(i)
		if err != nil {
			return 0, err
		}
		n += rec.NumRows()
	}
	return n, nil
}
