package bulk

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// The library's schema constructors (Go struct, Arrow schema, fields) give
// the same schema as the equivalent document, and a Parquet writer over it
// takes records.
func TestSchemaFromLibrary(t *testing.T) {
	type Inner struct {
		Tag string `json:"tag"`
	}
	type Event struct {
		ID      int64     `parquet:"id"`
		Count   *int32    `json:"count"`
		Name    string    `json:"name"`
		Skipped string    `json:"-"`
		Seen    time.Time `parquet:"seen,timestamp_ms"`
		Tags    []string  `json:"tags"`
		Inner   Inner     `json:"inner"`
		hidden  int
	}
	_ = Event{}.hidden
	want := []Field{
		{Name: "id", Type: "int64"},
		{Name: "count", Type: "int32", Nullable: true},
		{Name: "name", Type: "string"},
		{Name: "seen", Type: "timestamp_ms"},
		{Name: "tags", Type: "list<string>"},
		{Name: "inner", Type: "struct", Fields: []Field{{Name: "tag", Type: "string"}}},
	}
	fromStruct, err := SchemaFromStruct(&Event{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(fromStruct.Fields())
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(got, wantJSON) {
		t.Fatalf("SchemaFromStruct fields\n got %s\nwant %s", got, wantJSON)
	}
	fromFields, err := NewSchema(want)
	if err != nil {
		t.Fatal(err)
	}
	if !fromFields.Arrow().Equal(fromStruct.Arrow()) {
		t.Fatalf("NewSchema and SchemaFromStruct differ:\n%s\n%s", fromFields.Arrow(), fromStruct.Arrow())
	}
	fromArrow, err := SchemaFromArrow(fromStruct.Arrow())
	if err != nil {
		t.Fatal(err)
	}
	if fromArrow.Arrow() != fromStruct.Arrow() || len(fromArrow.Fields()) != len(want) {
		t.Fatalf("SchemaFromArrow did not keep the Arrow schema: %v", fromArrow.Fields())
	}
	if _, err := SchemaFromStruct(42); err == nil {
		t.Fatal("SchemaFromStruct(42) succeeded")
	}
	if _, err := SchemaFromArrow(arrow.NewSchema(nil, nil)); err == nil {
		t.Fatal("SchemaFromArrow of an empty schema succeeded")
	}
	f, err := Parquet(fromStruct)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := f.NewWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte(`{"id":1,"count":null,"name":"a","seen":1700000000000,"tags":["x"],"inner":{"tag":"t"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out.Bytes(), []byte("PAR1")) || !bytes.HasSuffix(out.Bytes(), []byte("PAR1")) {
		t.Fatal("the file is not a complete Parquet file")
	}
}
