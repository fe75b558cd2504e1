package faultproxy

import (
	"net/http/httptest"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		header         map[string]string
		want           Kind
	}{
		// Objects.
		{"PUT", "/b/k", nil, PutObject},
		{"PUT", "/b/dir/k.json?x-id=PutObject", nil, PutObject},
		{"PUT", "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab", nil, PutObject},
		{"PUT", "/b/k?partNumber=3&uploadId=abc&x-id=UploadPart", nil, UploadPart},
		{"PUT", "/b/k?uploadId=abc&partNumber=1", map[string]string{"X-Amz-Copy-Source": "/b/src"}, UploadPart},
		{"PUT", "/b/k?uploadId=abc", nil, Other},
		{"PUT", "/b/k?x-id=CopyObject", map[string]string{"X-Amz-Copy-Source": "/b/src"}, CopyObject},
		{"PUT", "/b/k?tagging", nil, Other},
		{"PUT", "/b/k?acl", nil, Other},
		{"POST", "/b/k?uploads", nil, CreateMultipartUpload},
		{"POST", "/b/k?uploads=&x-id=CreateMultipartUpload", nil, CreateMultipartUpload},
		{"POST", "/b/k?uploadId=abc", nil, CompleteMultipartUpload},
		{"POST", "/b/k?restore", nil, Other},
		{"DELETE", "/b/k?uploadId=abc&x-id=AbortMultipartUpload", nil, AbortMultipartUpload},
		{"DELETE", "/b/k?x-id=DeleteObject", nil, DeleteObject},
		{"DELETE", "/b/k?versionId=v1", nil, DeleteObject},
		{"DELETE", "/b/k?tagging", nil, Other},
		{"GET", "/b/k?uploadId=abc&max-parts=1000&x-id=ListParts", nil, ListParts},
		{"GET", "/b/k?x-id=GetObject", nil, GetObject},
		{"GET", "/b/k?partNumber=2&versionId=v&response-content-type=text%2Fplain", map[string]string{"Range": "bytes=0-9"}, GetObject},
		{"GET", "/b/k?tagging", nil, Other},
		{"GET", "/b/k?acl", nil, Other},
		{"HEAD", "/b/k", nil, HeadObject},
		{"HEAD", "/b/k?partNumber=1", nil, HeadObject},
		{"GET", "/b/a%2Fb%3Fc", nil, GetObject}, // escaped key
		{"GET", "/b/k/", nil, GetObject},
		// Buckets.
		{"GET", "/b?uploads", nil, ListMultipartUploads},
		{"GET", "/b/?uploads&prefix=p%2F&max-uploads=1000", nil, ListMultipartUploads},
		{"GET", "/b?list-type=2&prefix=x&continuation-token=t", nil, ListObjectsV2},
		{"GET", "/b/?list-type=2", nil, ListObjectsV2},
		{"GET", "/b?prefix=x", nil, Other}, // ListObjects v1
		{"GET", "/b?location", nil, Other},
		{"GET", "/b?versions", nil, Other},
		{"PUT", "/b", nil, CreateBucket},
		{"PUT", "/b/", nil, CreateBucket},
		{"PUT", "/b?versioning", nil, Other},
		{"HEAD", "/b", nil, HeadBucket},
		{"POST", "/b?delete", nil, DeleteObjects},
		{"POST", "/b/?delete=&x-id=DeleteObjects", nil, DeleteObjects},
		{"DELETE", "/b", nil, Other}, // DeleteBucket
		// Service.
		{"GET", "/", nil, Other},
		{"GET", "/?x-id=ListBuckets", nil, Other},
		{"OPTIONS", "/b/k", nil, Other},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		if got := Classify(r); got != tc.want {
			t.Errorf("%s %s %v: Classify = %v, want %v", tc.method, tc.target, tc.header, got, tc.want)
		}
	}
}

func TestKindAndActionNames(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		s := k.String()
		if s == "" || seen[s] {
			t.Errorf("kind %d: name %q empty or repeated", k, s)
		}
		seen[s] = true
	}
	if len(Kinds()) != int(numKinds) || Kinds()[0] != Other {
		t.Errorf("Kinds() = %v", Kinds())
	}
	if s := Kind(99).String(); s != "Kind(99)" {
		t.Errorf("Kind(99) = %q", s)
	}
	for a := range numActions {
		if a.String() == "" {
			t.Errorf("action %d has no name", a)
		}
	}
}
