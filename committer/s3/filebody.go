package s3

import (
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"syscall"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
)

// withFileBody makes one call send bytes [off, off+n) of the spill file f
// as its request body straight from the file: each attempt opens f anew
// (its own file offset, so that an abandoned attempt still being written
// cannot move the next one's) and hands net/http a body that exposes the
// descriptor, so that on a plain TCP connection the kernel copies the
// bytes from the page cache to the socket (sendfile) instead of reading
// them into the process and writing them out again: one copy instead of
// two, and a few large system calls instead of two per 32 KiB.
//
// The SDK still gets its usual seekable body (it is not read when the
// checksum and payload hash are given, and a request whose body the SDK
// changed, such as an aws-chunked one, is sent as the SDK built it). Over
// TLS, or where the file cannot be opened anew (no /proc), the bytes go
// through the process as before.
func withFileBody(f *os.File, off, n int64) func(*s3api.Options) {
	if runtime.GOOS != "linux" || n <= 0 {
		return func(*s3api.Options) {}
	}
	return func(o *s3api.Options) {
		if o.HTTPClient == nil {
			return
		}
		o.HTTPClient = fileBodyClient{inner: o.HTTPClient, f: f, off: off, n: n}
	}
}

// fileBodyClient is the HTTP client of one call made by withFileBody.
type fileBodyClient struct {
	inner s3api.HTTPClient
	f     *os.File
	off   int64
	n     int64
}

func (c fileBodyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.ContentLength != c.n || req.Header.Get("Content-Encoding") != "" || req.URL.Scheme != "http" {
		return c.inner.Do(req)
	}
	open := func() (io.ReadCloser, error) { return c.open() }
	body, err := open()
	if err != nil {
		return c.inner.Do(req) // the SDK's body, read through the process
	}
	// The SDK's body is not closed here: the SDK owns it (and rewinds it
	// for its own retries).
	r := req.Clone(req.Context())
	r.Body, r.GetBody = body, open
	return c.inner.Do(r)
}

// open returns a fresh descriptor of the file positioned at c.off.
func (c fileBodyClient) open() (*fileBody, error) {
	sc, err := c.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var g *os.File
	var oerr error
	if err := sc.Control(func(fd uintptr) {
		g, oerr = os.Open("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, oerr
	}
	if _, err := g.Seek(c.off, io.SeekStart); err != nil {
		g.Close()
		return nil, err
	}
	return &fileBody{f: g, end: c.off + c.n}, nil
}

// fileBody is a request body read from a file up to end; net/http's
// sendfile path finds its descriptor through SyscallConn (it wraps the
// body in an io.LimitedReader of the request's length, and then reads on
// to check that nothing is left: Read takes the file offset, which
// sendfile moves, to end there).
type fileBody struct {
	f   *os.File
	end int64
}

func (b *fileBody) Read(p []byte) (int, error) {
	pos, err := b.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	if pos >= b.end {
		return 0, io.EOF
	}
	if int64(len(p)) > b.end-pos {
		p = p[:b.end-pos]
	}
	return b.f.Read(p)
}

func (b *fileBody) Close() error                          { return b.f.Close() }
func (b *fileBody) SyscallConn() (syscall.RawConn, error) { return b.f.SyscallConn() }
