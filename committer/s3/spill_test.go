package s3

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestSpillReuseAndPayloadHash writes parts of different content through
// one writer whose spill files are reused (a short last part lands in a
// file that held a full one), against MinIO over plain HTTP: every part
// request must be signed with the SHA-256 of the bytes it carried (the
// writer's precomputed one; MinIO rejects a mismatch), and the object
// must hold exactly the bytes written, none of a reused file's stale ones.
// A second writer of the backend (as after a roll) takes its first spill
// file from the ones the first released; Close empties the pool.
func TestSpillReuseAndPayloadHash(t *testing.T) {
	srv := requireMinio(t)
	var mu sync.Mutex
	var parts, mismatched int
	client := s3api.New(s3api.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey(), srv.SecretKey(), ""),
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != "" {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return nil, err
				}
				sum := sha256.Sum256(body)
				mu.Lock()
				parts++
				if r.Header.Get("X-Amz-Content-Sha256") != hex.EncodeToString(sum[:]) {
					mismatched++
				}
				mu.Unlock()
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			return http.DefaultTransport.RoundTrip(r)
		})},
	})
	b, err := New(client, srv.NewBucket(t), "spill", WithPartSize(MinPartSize), WithConcurrency(1), WithSpillDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if !b.hashSpill {
		t.Fatal("a plain-HTTP endpoint: the writers should precompute the payload hash")
	}
	w := open(t, b, "part-0-r1-1.txt")
	var data []byte
	for i := range 5 {
		data = append(data, pattern(10+i, MinPartSize)...)
	}
	for i := 0; i < len(data); i += 1 << 20 {
		write(t, w, data[i:min(i+1<<20, len(data))])
	}
	if err := w.waitParts(t.Context(), 5); err != nil {
		t.Fatal(err)
	}
	spare := b.spills.kept()
	if spare == 0 {
		t.Fatal("no spill file came back to the pool after the parts were uploaded")
	}
	last := pattern(99, 1000)
	write(t, w, last)
	data = append(data, last...)
	p, rec := closeForCommit(t, w)
	if len(rec.Parts) != 6 {
		t.Fatalf("%d parts, want 6", len(rec.Parts))
	}
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	h := &harness{client: client, bucket: b.bucket, prefix: "spill"}
	h.wantTarget(t, "part-0-r1-1.txt", data)
	// The next writer (after a roll) takes the files the first released.
	kept := b.spills.kept()
	if kept == 0 {
		t.Fatal("no spill file kept after the writer closed")
	}
	w2 := open(t, b, "part-0-r1-2.txt")
	next := pattern(7, 3000)
	write(t, w2, next)
	if got := b.spills.kept(); got != kept-1 {
		t.Errorf("the second writer's first spill file: %d kept before, %d after; want one taken from the pool", kept, got)
	}
	p2, _ := closeForCommit(t, w2)
	if err := b.Commit(t.Context(), p2); err != nil {
		t.Fatal(err)
	}
	h.wantTarget(t, "part-0-r1-2.txt", next)
	if err := b.Close(); err != nil || b.spills.kept() != 0 {
		t.Errorf("Close: %v, %d files kept", err, b.spills.kept())
	}
	mu.Lock()
	defer mu.Unlock()
	if parts != 7 || mismatched != 0 {
		t.Errorf("%d part requests, %d signed with a hash that is not their body's; want 7 (6 of the first writer, 1 of the second) and 0", parts, mismatched)
	}
}

// TestWithPayloadHash: the hash given is the one signed, over plain HTTP
// and over TLS; the SDK does not read the body to compute its own.
func TestWithPayloadHash(t *testing.T) {
	const hash = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	for _, tls := range []bool{false, true} {
		var got string
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.Header.Get("X-Amz-Content-Sha256")
			w.Header().Set("ETag", `"x"`)
		})
		srv := httptest.NewServer(handler)
		if tls {
			srv.Close()
			srv = httptest.NewTLSServer(handler)
		}
		client := s3api.New(s3api.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, HTTPClient: srv.Client(),
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		})
		if plainHTTP(client) == tls {
			t.Errorf("tls=%v: plainHTTP = %v", tls, !tls)
		}
		_, err := client.UploadPart(t.Context(), &s3api.UploadPartInput{
			Bucket: aws.String("b"), Key: aws.String("k"), UploadId: aws.String("u"), PartNumber: aws.Int32(1),
			Body: bytes.NewReader([]byte("body")), ContentLength: aws.Int64(4), ChecksumCRC32: crcBase64(0),
		}, withPayloadHash(hash))
		srv.Close()
		if err != nil {
			t.Fatalf("tls=%v: UploadPart: %v", tls, err)
		}
		if got != hash {
			t.Errorf("tls=%v: signed payload hash %q, want the precomputed %q", tls, got, hash)
		}
	}
}
