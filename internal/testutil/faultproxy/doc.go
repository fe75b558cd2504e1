// Package faultproxy is an HTTP reverse proxy for tests that sits between an
// S3 client and MinIO and injects faults into chosen requests: 503 SlowDown
// and 500 InternalError answers (with S3's XML error bodies), connection
// resets before the request is forwarded, resets after MinIO has executed
// it but before the client hears the reply (the in-doubt case, e.g. a
// CompleteMultipartUpload that happened although the client saw an error),
// 409 ConditionalRequestConflict answers (with or without forwarding the
// request first), and delays.
//
// Requests are classified by S3 operation (Classify, path-style addressing)
// and forwarded unchanged, Host header included, so a client pointed at the
// proxy signs for the proxy's host and MinIO accepts the signature. Rules
// fire on matching requests with a probability (a seeded generator; the
// seed is logged and can be fixed with FAULTPROXY_SEED) and/or for the next
// N matches; a rule's Gate holds the requests it fires on until the test
// lets them go. Rules can be added and removed while requests are in flight.
// The proxy counts requests and injected faults per kind, so a test can
// assert that the faults really happened, and the upstream's replies per
// kind and status. It keeps an audit log of the object writes (PutObject
// and CompleteMultipartUpload, not part uploads) with MinIO's answer to
// each, also when the client never heard it: Writes lists those that
// happened, to the keys a test calls visible, so a key written twice shows;
// CountReplies counts e.g. the conditional writes under a prefix that lost
// (412).
//
// The upstream can be any HTTP server (a Schema Registry, say): requests
// that are not S3 operations are Other, and a rule without Kinds applies
// to every request (SlowDown is then a plain 503, ResetBefore a reset
// connection). Down takes the proxy off the network (connections refused,
// those open closed) and Up brings it back on the same address: the
// upstream gone and back, as its clients see it.
//
//	srv := minio.Shared(t) // internal/testutil/miniotest
//	p := faultproxy.New(t, srv.Endpoint())
//	client := srv.ClientAt(t, p.URL())
//	p.FailNext(faultproxy.CompleteMultipartUpload, faultproxy.ResetAfter, 1)
//	p.FailRandomly(0.2, faultproxy.SlowDown) // every kind
//	...
//	if p.Injected(faultproxy.CompleteMultipartUpload) == 0 { t.Fatal("no fault injected") }
//	t.Log(p.Stats())
//	for _, w := range p.Writes(faultproxy.HidePrefixes("out/_filesink/")) { ... }
package faultproxy
