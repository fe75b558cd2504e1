package iceberg_test

import (
	"bytes"
	"testing"

	ice "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

// What LocalIO wrote, by Create or WriteFile, survives a power cut whole,
// with the directories it made; it never overwrites a file.
func TestLocalIODurable(t *testing.T) {
	fsys := crashfs.New()
	l := ice.NewLocalIO(fsys)
	meta := bytes.Repeat([]byte(`{"format-version":2}`), 100)
	if err := l.WriteFile("file:///wh/db/t/metadata/00001.metadata.json", meta); err != nil {
		t.Fatal(err)
	}
	w, err := l.Create("/wh/db/t/metadata/snap-1.avro")
	if err != nil {
		t.Fatal(err)
	}
	manifest := bytes.Repeat([]byte("avro"), 5000)
	if _, err := w.ReadFrom(bytes.NewReader(manifest[:7000])); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(manifest[7000:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after := fsys.CrashCloneSynced()
	for name, want := range map[string][]byte{"/wh/db/t/metadata/00001.metadata.json": meta, "/wh/db/t/metadata/snap-1.avro": manifest} {
		got, err := vfs.ReadFile(after, name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after a power cut: %d bytes, %v; want %d", name, len(got), err, len(want))
		}
	}
	if err := l.WriteFile("file:///wh/db/t/metadata/00001.metadata.json", []byte("{}")); err == nil {
		t.Error("WriteFile over an existing file succeeded")
	}
	if _, err := l.Create("file://otherhost/wh/x"); err == nil {
		t.Error("a location with a host was accepted")
	}
}
