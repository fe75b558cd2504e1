package icebergtest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// FieldID is the Arrow field metadata that gives a column its Iceberg
// field id in a Parquet file.
func FieldID(id int) arrow.Metadata {
	return arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(id)})
}

// WriteParquet writes rec as the Parquet file path, making its
// directories, for tests that build Iceberg tables by hand (rec's fields
// carry their ids: FieldID). It fails t on any error.
func WriteParquet(t testing.TB, path string, rec arrow.RecordBatch) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), out, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // closes out
		t.Fatal(err)
	}
}
