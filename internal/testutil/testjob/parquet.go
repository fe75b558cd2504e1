package testjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ParquetMagic starts and ends every complete Parquet file.
const ParquetMagic = "PAR1"

// ReadParquet checks that data is a complete Parquet file (the magic at
// both ends: a truncated or footer-less file fails) and reads it whole
// with Arrow's pqarrow reader. The caller releases the table.
func ReadParquet(data []byte) (arrow.Table, error) {
	if len(data) < 12 || !bytes.HasPrefix(data, []byte(ParquetMagic)) || !bytes.HasSuffix(data, []byte(ParquetMagic)) {
		return nil, fmt.Errorf("parquet: %d bytes without the %s magic at both ends (truncated or footer-less file)", len(data), ParquetMagic)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	return tbl, nil
}

// ParquetIDs returns the int64 "id" column of a complete Parquet file.
func ParquetIDs(data []byte) ([]int64, error) {
	tbl, err := ReadParquet(data)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	idx := tbl.Schema().FieldIndices("id")
	if len(idx) != 1 {
		return nil, errors.New("parquet: no id column")
	}
	var ids []int64
	for _, chunk := range tbl.Column(idx[0]).Data().Chunks() {
		col, ok := chunk.(*array.Int64)
		if !ok {
			return nil, fmt.Errorf("parquet: id column is %s, want int64", chunk.DataType())
		}
		for i := range col.Len() {
			if col.IsNull(i) {
				return nil, fmt.Errorf("parquet: null id in row %d", len(ids))
			}
			ids = append(ids, col.Value(i))
		}
	}
	return ids, nil
}

// ParquetReader reads the ids of .parquet files for Check.
func ParquetReader() FileReader { return FileReader{Ext: ".parquet", IDs: ParquetIDs} }

// GenSchema is the schema document of the generator's records (gen://,
// source.NewGenerator) for bulk formats.
const GenSchema = `{"fields": [
	{"name": "id", "type": "int64", "nullable": false},
	{"name": "key", "type": "string"},
	{"name": "ts", "type": "timestamp_ms"},
	{"name": "payload", "type": "string"}]}`
