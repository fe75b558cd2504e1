package bulk

import (
	"fmt"
	"testing"
)

// TestFlatColumns: the converter's flat columns hold exactly the values
// and nulls of the records, across record batches cut at random points
// (each next batch's columns reserved from the last one's lengths, as the
// row buffer does), with columns whose first null comes late, columns that
// are all null and batches of one row.
func TestFlatColumns(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(2000, 7)
	// Only the required field for 300 records: every other column all
	// null in the batches cut among them.
	for i := 1000; i < 1300; i++ {
		recs[i] = fmt.Appendf(nil, `{"id":%d}`, i)
	}
	opts, err := newConfig([]Option{WithRowGroupRows(1 << 20), WithUnknownFields(DropUnknown)})
	if err != nil {
		t.Fatal(err)
	}
	r := newRowBuffer(s, opts)
	defer r.release()
	for i, rec := range recs {
		if err := r.add(rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if i%337 == 0 || i == 1000 || i == 1299 || i == 1300 {
			r.cut()
		}
	}
	r.cut()
	compareRecords(t, s, r.pending, expectRows(t, s, recs))
}

// TestTextLimitCuts: the row buffer cuts its rows into a record batch
// before the JSON text converted into its columns passes maxText (2 GiB
// in use: the int32 offsets of string and binary columns), and the
// batches hold every row.
func TestTextLimitCuts(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(500, 9)
	opts, err := newConfig([]Option{WithRowGroupRows(1 << 20), WithUnknownFields(DropUnknown)})
	if err != nil {
		t.Fatal(err)
	}
	r := newRowBuffer(s, opts)
	defer r.release()
	r.maxText = 4096
	for i, rec := range recs {
		if err := r.add(rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if r.text > r.maxText {
			t.Fatalf("record %d: %d bytes of text in the columns, limit %d", i, r.text, r.maxText)
		}
	}
	r.cut()
	if len(r.pending) < 10 {
		t.Fatalf("%d batches for 500 records with 4 KiB of text each at most", len(r.pending))
	}
	compareRecords(t, s, r.pending, expectRows(t, s, recs))
}
