package faultproxy

import (
	"net/http"
	"strconv"
	"strings"
)

// Kind is the S3 operation of a request, as far as the proxy can tell from
// its method, path and query (path-style addressing: /BUCKET/KEY).
type Kind int

// Request kinds. Other is everything not listed (bucket configuration,
// tagging, ListObjects v1, ListBuckets, DeleteBucket, ...).
const (
	Other Kind = iota
	PutObject
	UploadPart // PUT /b/k?partNumber&uploadId, including UploadPartCopy
	CreateMultipartUpload
	CompleteMultipartUpload
	AbortMultipartUpload
	ListParts
	ListMultipartUploads
	GetObject
	HeadObject
	DeleteObject
	ListObjectsV2
	CopyObject    // PUT /b/k with x-amz-copy-source
	DeleteObjects // POST /b?delete
	CreateBucket
	HeadBucket
	numKinds
)

var kindNames = [numKinds]string{
	Other:                   "Other",
	PutObject:               "PutObject",
	UploadPart:              "UploadPart",
	CreateMultipartUpload:   "CreateMultipartUpload",
	CompleteMultipartUpload: "CompleteMultipartUpload",
	AbortMultipartUpload:    "AbortMultipartUpload",
	ListParts:               "ListParts",
	ListMultipartUploads:    "ListMultipartUploads",
	GetObject:               "GetObject",
	HeadObject:              "HeadObject",
	DeleteObject:            "DeleteObject",
	ListObjectsV2:           "ListObjectsV2",
	CopyObject:              "CopyObject",
	DeleteObjects:           "DeleteObjects",
	CreateBucket:            "CreateBucket",
	HeadBucket:              "HeadBucket",
}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Kinds returns every Kind, Other first.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// Classify returns the kind of an S3 request in path-style addressing
// (/BUCKET or /BUCKET/KEY). Query parameters that do not select an
// operation (x-id, presigned X-Amz-*, versionId, partNumber on GET/HEAD,
// response-*) are ignored; an unknown subresource makes the request Other.
func Classify(r *http.Request) Kind {
	bucket, key := splitPath(r.URL.Path)
	q := r.URL.Query()
	has := func(name string) bool { _, ok := q[name]; return ok }
	// plain: no query parameter beyond those allowed for the operation.
	plain := func(allowed ...string) bool {
		for name := range q {
			if name == "x-id" || strings.HasPrefix(name, "X-Amz-") || strings.HasPrefix(strings.ToLower(name), "response-") {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || name == a
			}
			if !ok {
				return false
			}
		}
		return true
	}
	switch {
	case bucket == "":
		return Other // ListBuckets
	case key == "":
		switch r.Method {
		case http.MethodGet:
			switch {
			case has("uploads"):
				return ListMultipartUploads
			case q.Get("list-type") == "2":
				return ListObjectsV2
			}
		case http.MethodPut:
			if plain() {
				return CreateBucket
			}
		case http.MethodHead:
			if plain() {
				return HeadBucket
			}
		case http.MethodPost:
			if has("delete") {
				return DeleteObjects
			}
		}
		return Other
	}
	switch r.Method {
	case http.MethodPut:
		switch {
		case has("uploadId") && has("partNumber"):
			return UploadPart
		case !plain():
			return Other
		case r.Header.Get("X-Amz-Copy-Source") != "":
			return CopyObject
		default:
			return PutObject
		}
	case http.MethodPost:
		switch {
		case has("uploads"):
			return CreateMultipartUpload
		case has("uploadId"):
			return CompleteMultipartUpload
		}
	case http.MethodDelete:
		switch {
		case has("uploadId"):
			return AbortMultipartUpload
		case plain("versionId"):
			return DeleteObject
		}
	case http.MethodGet:
		switch {
		case has("uploadId"):
			return ListParts
		case plain("versionId", "partNumber"):
			return GetObject
		}
	case http.MethodHead:
		if plain("versionId", "partNumber") {
			return HeadObject
		}
	}
	return Other
}

// splitPath splits "/bucket/key/with/slashes" into bucket and key.
func splitPath(p string) (bucket, key string) {
	p = strings.TrimPrefix(p, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}
