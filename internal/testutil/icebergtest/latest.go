package icebergtest

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// metadataName matches the names of metadata files: NNNNN-<uuid>.metadata.json
// (catalogs, iceberg-go and Java) and vN.metadata.json (tables without a
// catalog).
var metadataName = regexp.MustCompile(`^(?:(\d+)-[^/]*|v(\d+))\.metadata\.json$`)

// metadataVersion returns the version in a metadata file's name, false for
// a name that is not one.
func metadataVersion(name string) (int64, bool) {
	m := metadataName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseInt(m[1]+m[2], 10, 64)
	return v, err == nil
}

// newest returns the name with the highest metadata version. A nil error
// means exactly one name has it.
func newest(where string, names []string) (string, error) {
	best, bestV, tie := "", int64(-1), ""
	for _, n := range names {
		v, ok := metadataVersion(path.Base(n))
		switch {
		case !ok:
		case v > bestV:
			best, bestV, tie = n, v, ""
		case v == bestV:
			tie = n
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s: no *.metadata.json", where)
	}
	if tie != "" {
		return "", fmt.Errorf("%s: two metadata files of version %d: %s and %s", where, bestV, path.Base(best), path.Base(tie))
	}
	return best, nil
}

// Latest returns the path of the newest metadata file (by the version in
// its name) in the metadata directory of the local table at tableDir. A nil
// error means exactly one file has that version. A table kept by a catalog
// is what the catalog's metadata location says; Latest is the same unless a
// commit failed after writing its metadata file.
func Latest(tableDir string) (string, error) {
	dir := filepath.Join(tableDir, "metadata")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	return newest(dir, names)
}

// LatestS3 is Latest for a table at s3://bucket/prefix: it lists the
// metadata directory and returns the newest file's location,
// s3://bucket/prefix/metadata/NAME.
func LatestS3(ctx context.Context, client *s3.Client, bucket, prefix string) (string, error) {
	dir := keyPrefix(prefix) + "metadata/"
	var names []string
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &dir})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("listing s3://%s/%s: %w", bucket, dir, err)
		}
		for _, o := range page.Contents {
			if k := *o.Key; !strings.Contains(strings.TrimPrefix(k, dir), "/") {
				names = append(names, k)
			}
		}
	}
	key, err := newest("s3://"+bucket+"/"+dir, names)
	if err != nil {
		return "", err
	}
	return "s3://" + bucket + "/" + key, nil
}

// keyPrefix returns prefix as a key prefix: "" or ending in one slash.
func keyPrefix(prefix string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return ""
	}
	return prefix + "/"
}
