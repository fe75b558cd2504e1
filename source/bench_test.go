package source_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/filesink/filesink/source"
)

// writeLines writes a file of about total bytes of lines whose lengths vary
// around lineLen, and returns its size.
func writeLines(b *testing.B, name string, total, lineLen int) int64 {
	b.Helper()
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	line := make([]byte, 0, 2*lineLen)
	var size int64
	for i := 0; size < int64(total); i++ {
		n := lineLen - lineLen/8 + (i*7919)%(lineLen/4+1) // lineLen ± 12%
		line = strconv.AppendInt(line[:0], int64(i), 10)
		for len(line) < n {
			line = append(line, byte('a'+len(line)%26))
		}
		line = append(line, '\n')
		w.Write(line)
		size += int64(len(line))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return size
}

// BenchmarkDir reads a 100 MB file from the page cache. The raw-* cases are
// the limits, measured in the same run: raw-read is read(2) into a 1 MiB
// buffer and nothing else; raw-scan also finds every "\n". bufio-scanner is
// the standard library's line scanner for comparison.
func BenchmarkDir(b *testing.B) {
	for _, lineLen := range []int{1024, 100} {
		dir := b.TempDir()
		name := filepath.Join(dir, "in.txt")
		size := writeLines(b, name, 100<<20, lineLen)
		ctx := context.Background()
		sfx := "/lines=" + strconv.Itoa(lineLen)

		b.Run("source"+sfx, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				d, err := source.NewDir(ctx, dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					_, err := d.Next(ctx)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				d.Close()
				if n == 0 {
					b.Fatal("no records")
				}
			}
		})
		b.Run("raw-read"+sfx, func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, source.DefaultBufferSize)
			for b.Loop() {
				f, err := os.Open(name)
				if err != nil {
					b.Fatal(err)
				}
				for {
					_, err := f.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
			}
		})
		b.Run("raw-scan"+sfx, func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, source.DefaultBufferSize)
			for b.Loop() {
				f, err := os.Open(name)
				if err != nil {
					b.Fatal(err)
				}
				lines := 0
				for {
					n, err := f.Read(buf)
					for p := buf[:n]; ; {
						i := bytes.IndexByte(p, '\n')
						if i < 0 {
							break
						}
						lines++
						p = p[i+1:]
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
			}
		})
		b.Run("bufio-scanner"+sfx, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				f, err := os.Open(name)
				if err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				sc.Buffer(make([]byte, source.DefaultBufferSize), source.DefaultMaxLineSize)
				for sc.Scan() {
				}
				if err := sc.Err(); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// BenchmarkGenerator measures records per second and bytes per second of
// generated lines of 100 B and 1 KiB, with the default 1 ms step (3
// fractional digits) and a 1 ns step (9 digits).
func BenchmarkGenerator(b *testing.B) {
	for _, tc := range []struct {
		size int
		step time.Duration
	}{{100, 0}, {1024, 0}, {100, time.Nanosecond}} {
		name := "size=" + strconv.Itoa(tc.size)
		if tc.step != 0 {
			name += "/step=" + tc.step.String()
		}
		b.Run(name, func(b *testing.B) {
			size := tc.size
			g, err := source.NewGenerator(source.GenConfig{Count: 1 << 40, Seed: 1, Size: size, Step: tc.step}, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReader reads 1 KiB lines from an in-memory reader, with a
// background context (direct reads) and a cancellable one (reads on the
// helper goroutine).
func BenchmarkReader(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; buf.Len() < 16<<20; i++ {
		buf.WriteString(strconv.Itoa(i))
		buf.Write(bytes.Repeat([]byte("x"), 1000))
		buf.WriteByte('\n')
	}
	data := buf.Bytes()
	for _, cancellable := range []bool{false, true} {
		b.Run("cancellable="+strconv.FormatBool(cancellable), func(b *testing.B) {
			ctx := context.Background()
			if cancellable {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				s, err := source.NewReader(bytes.NewReader(data), "mem")
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := s.Next(ctx); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
				s.Close()
			}
		})
	}
}

// BenchmarkDirResume measures NewDir resuming in the last of 100,000 small
// files (100 directories of 1,000 files of about 100 bytes, in the page
// cache): it reads the size and the first bytes of each of the 99,999 files
// before the checkpoint's to check that none changed since it was read.
// ns/file is the cost per file; list measures a fresh source, which
// lists the files and reads none, and read one reading all the files, for
// comparison.
func BenchmarkDirResume(b *testing.B) {
	const dirs, perDir = 100, 1000
	root := b.TempDir()
	line := bytes.Repeat([]byte("x"), 99)
	line[98] = '\n'
	for i := range dirs {
		d := filepath.Join(root, "d"+strconv.Itoa(1000+i))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range perDir {
			if err := os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(10000+j)), line, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	readAll := func(d *source.Dir) int {
		n := 0
		for {
			_, err := d.Next(ctx)
			if err == io.EOF {
				return n
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	d, err := source.NewDir(ctx, root, nil)
	if err != nil {
		b.Fatal(err)
	}
	if n := readAll(d); n != dirs*perDir {
		b.Fatalf("read %d records", n)
	}
	pos, err := d.Position()
	if err != nil {
		b.Fatal(err)
	}
	d.Close()
	b.Run("resume", func(b *testing.B) {
		for b.Loop() {
			d, err := source.NewDir(ctx, root, pos)
			if err != nil {
				b.Fatal(err)
			}
			d.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(dirs*perDir), "ns/file")
		b.ReportMetric(float64(len(pos)), "position-bytes")
	})
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			d, err := source.NewDir(ctx, root, nil)
			if err != nil {
				b.Fatal(err)
			}
			d.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(dirs*perDir), "ns/file")
	})
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			d, err := source.NewDir(ctx, root, nil)
			if err != nil {
				b.Fatal(err)
			}
			if n := readAll(d); n != dirs*perDir {
				b.Fatalf("read %d records", n)
			}
			d.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(dirs*perDir), "ns/file")
	})
}
