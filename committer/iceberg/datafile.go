package iceberg

import (
	"encoding/json"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// FileRecord is what a decided checkpoint records of one data file, so
// that a commit after a crash appends exactly the file that was decided:
// its location, size, record count, partition spec and partition values.
// It is JSON in the checkpoint.
type FileRecord struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Records int64  `json:"records"`
	SpecID  int    `json:"spec_id"`
	// Partition holds the value of each partition field (by its field id)
	// as filesink computed it: an int for day and hour transforms and for
	// int and date columns, a string for string columns, ...
	Partition map[int]json.RawMessage `json:"partition,omitempty"`
}

// DataFile returns the Iceberg data file of r for tbl: its partition
// values typed by the partition spec r names. A nil error means the spec
// exists and each value has its field's type; every field of the spec
// must have a value (null is a value).
func (r FileRecord) DataFile(tbl *table.Table) (iceberg.DataFile, error) {
	var spec *iceberg.PartitionSpec
	for _, s := range tbl.Metadata().PartitionSpecs() {
		if s.ID() == r.SpecID {
			spec = &s
			break
		}
	}
	if spec == nil {
		return nil, fmt.Errorf("iceberg: data file %s: the table has no partition spec %d", r.Path, r.SpecID)
	}
	ptype := spec.PartitionType(tbl.Schema())
	values := make(map[int]any, len(ptype.FieldList))
	for _, f := range ptype.FieldList {
		raw, ok := r.Partition[f.ID]
		if !ok {
			return nil, fmt.Errorf("iceberg: data file %s: no value for partition field %s", r.Path, f.Name)
		}
		v, err := partitionValue(f.Type, raw)
		if err != nil {
			return nil, fmt.Errorf("iceberg: data file %s: partition field %s: %w", r.Path, f.Name, err)
		}
		values[f.ID] = v
	}
	if len(r.Partition) != len(ptype.FieldList) {
		return nil, fmt.Errorf("iceberg: data file %s: %d partition values for the %d fields of spec %d", r.Path, len(r.Partition), len(ptype.FieldList), r.SpecID)
	}
	b, err := iceberg.NewDataFileBuilder(*spec, iceberg.EntryContentData, r.Path, iceberg.ParquetFile, values, nil, nil, r.Records, r.Size)
	if err != nil {
		return nil, fmt.Errorf("iceberg: data file %s: %w", r.Path, err)
	}
	return b.Build(), nil
}

// partitionValue decodes a partition value of type typ (nil for null).
func partitionValue(typ iceberg.Type, raw json.RawMessage) (any, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var err error
	switch typ.(type) {
	case iceberg.Int32Type, iceberg.DateType:
		var v int32
		err = json.Unmarshal(raw, &v)
		return v, err
	case iceberg.Int64Type, iceberg.TimestampType, iceberg.TimestampTzType:
		var v int64
		err = json.Unmarshal(raw, &v)
		return v, err
	case iceberg.StringType:
		var v string
		err = json.Unmarshal(raw, &v)
		return v, err
	case iceberg.BooleanType:
		var v bool
		err = json.Unmarshal(raw, &v)
		return v, err
	}
	return nil, fmt.Errorf("partition values of type %s are not supported", typ)
}
