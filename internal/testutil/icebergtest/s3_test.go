package icebergtest

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// IO of iceberg-go
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/filesink/filesink/internal/testutil/miniotest"
)

var minio miniotest.Pool

func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }

// TestReadS3 builds a table in MinIO with iceberg-go's S3 IO (data files
// uploaded first, then registered with AddFiles) and requires the reader
// to read it through WithS3, found by LatestS3.
func TestReadS3(t *testing.T) {
	t.Parallel()
	srv := minio.Shared(t)
	bucket := srv.NewBucket(t)
	client := srv.Client(t)
	f := newTableIn(t, t.TempDir(), false, iceberg.Properties{
		"warehouse":                        "s3://" + bucket + "/wh",
		icebergio.S3EndpointURL:            srv.Endpoint(),
		icebergio.S3Region:                 srv.Region(),
		icebergio.S3AccessKeyID:            srv.AccessKey(),
		icebergio.S3SecretAccessKey:        srv.SecretKey(),
		icebergio.S3ForceVirtualAddressing: "false",
	})
	const prefix = "wh/db.db/events"
	if want := "s3://" + bucket + "/" + prefix; f.tbl.Location() != want {
		t.Fatalf("table location %s, want %s", f.tbl.Location(), want)
	}
	upload := func(name string, rs []row) string {
		t.Helper()
		local := strings.TrimPrefix(f.writeParquet(t, name, rs), "file://")
		body, err := os.Open(local)
		if err != nil {
			t.Fatal(err)
		}
		defer body.Close()
		key := path.Join(prefix, "data", name)
		if _, err := client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: body}); err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
		return "s3://" + bucket + "/" + key
	}
	a, b, c := rows(1, 4, "a"), rows(5, 6, "b"), rows(11, 2, "c")
	fa, fb := upload("a.parquet", a), upload("b.parquet", b)
	f.addFiles(t, fa, fb)
	fc := upload("c.parquet", c)
	f.addFiles(t, fc)

	meta, err := LatestS3(t.Context(), client, bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if meta != f.tbl.MetadataLocation() {
		t.Fatalf("LatestS3 = %s, the catalog's metadata location is %s", meta, f.tbl.MetadataLocation())
	}
	got := MustRead(t, meta, WithS3(client, bucket, prefix), WithRows())
	if len(got.Errors) > 0 || len(got.DuplicatePaths) > 0 || len(got.Snapshots) != 2 {
		t.Fatalf("errors %q, duplicate paths %q, %d snapshots; want none, none, 2", got.Errors, got.DuplicatePaths, len(got.Snapshots))
	}
	var paths []string
	for _, file := range got.Files {
		paths = append(paths, file.Path)
	}
	if strings.Join(paths, " ") != strings.Join([]string{fc, fa, fb}, " ") || got.Rows != 12 {
		t.Errorf("files %q (rows %d), want %q (the newest manifest first; 12 rows)", paths, got.Rows, []string{fc, fa, fb})
	}
	checkData(t, got.Data, slices.Concat(a, b, c))
}
