package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/vfs"
)

func TestDirStorePutListGetPrune(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	s, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Latest(ctx, s); c != nil || err != nil {
		t.Fatalf("empty store: Latest = %v, %v", c, err)
	}
	for id := uint64(1); id <= 5; id++ {
		c := sample()
		c.ID = id
		if err := s.Put(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	c := sample()
	c.ID = 3
	if err := s.Put(ctx, c); err == nil {
		t.Fatal("Put overwrote record 3")
	}
	last, err := Latest(ctx, s)
	if err != nil || last.ID != 5 {
		t.Fatalf("Latest = %v, %v; want 5", last, err)
	}
	if err := Prune(ctx, s, 3); err != nil {
		t.Fatal(err)
	}
	ids, _ := s.List(ctx)
	if len(ids) != 3 || ids[0] != 3 || ids[2] != 5 {
		t.Fatalf("after Prune(3): %v", ids)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}

func TestDirStoreCorruptNewestIsLoud(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := OpenDir(ctx, vfs.OS{}, dir)
	for id := uint64(1); id <= 2; id++ {
		c := sample()
		c.ID = id
		if err := s.Put(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	name := filepath.Join(dir, "ckpt-00000000000000000002")
	b, _ := os.ReadFile(name)
	if err := os.WriteFile(name, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Latest(ctx, s)
	if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), name) {
		t.Fatalf("Latest over a truncated newest record = %v; want ErrCorruptCheckpoint naming %s", err, name)
	}
	if _, err := Retained(ctx, s); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("Retained = %v; want ErrCorruptCheckpoint", err)
	}
	// A stray file with the record prefix is loud too.
	os.WriteFile(filepath.Join(dir, "ckpt-junk"), nil, 0o644)
	if _, err := s.List(ctx); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("List with a stray ckpt- file = %v", err)
	}
}

// TestReadableReportsCorruptRecords: Readable returns the good records and
// names each defective one, while Latest and Retained still refuse.
func TestReadableReportsCorruptRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := OpenDir(ctx, vfs.OS{}, dir)
	for id := uint64(1); id <= 4; id++ {
		c := sample()
		c.ID = id
		if err := s.Put(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	truncated := filepath.Join(dir, "ckpt-00000000000000000002")
	garbage := filepath.Join(dir, "ckpt-00000000000000000004")
	if err := os.WriteFile(truncated, []byte("FSINK"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte(strings.Repeat("garbage ", 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	good, bad, err := Readable(ctx, s)
	if err != nil {
		t.Fatalf("Readable: %v", err)
	}
	if len(good) != 2 || good[0].ID != 1 || good[1].ID != 3 {
		t.Errorf("Readable: good records %v, want 1 and 3", good)
	}
	if len(bad) != 2 || bad[0].File != truncated || bad[1].File != garbage || !errors.Is(bad[0], ErrCorruptCheckpoint) {
		t.Errorf("Readable: bad records %v, want %s and %s", bad, truncated, garbage)
	}
	if _, err := Latest(ctx, s); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("Latest over a garbage newest record = %v; want ErrCorruptCheckpoint", err)
	}
	if _, err := Retained(ctx, s); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("Retained = %v; want ErrCorruptCheckpoint", err)
	}
	os.WriteFile(filepath.Join(dir, "ckpt-junk"), nil, 0o644)
	if _, _, err := Readable(ctx, s); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("Readable with a stray ckpt- file = %v; want the listing's error", err)
	}
}

func TestOpenDirRemovesTempFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tmp := filepath.Join(dir, ".ckpt-00000000000000000007.tmp-abc")
	os.WriteFile(tmp, []byte("partial"), 0o644)
	s, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("temp file of an interrupted Put survived OpenDir")
	}
	if ids, _ := s.List(ctx); len(ids) != 0 {
		t.Fatalf("temp file listed as record: %v", ids)
	}
}

func TestRecordNameMustMatchID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := OpenDir(ctx, vfs.OS{}, dir)
	c := sample()
	c.ID = 9
	s.Put(ctx, c)
	os.Rename(filepath.Join(dir, "ckpt-00000000000000000009"), filepath.Join(dir, "ckpt-00000000000000000010"))
	if _, err := s.Get(ctx, 10); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("record 9 under the name of 10: %v", err)
	}
}

func TestOpenDirLocks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenDir(ctx, nil, dir) // nil: the OS, which holds the lock
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Dir != dir || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second OpenDir of a held directory = %v; want a LockedError naming %s", err, dir)
	}
	if le.PID != os.Getpid() {
		t.Errorf("holder pid = %d; want %d", le.PID, os.Getpid())
	}
	// A read-only store takes no lock and cannot write.
	ro, err := OpenDir(ctx, vfs.OS{}, dir, ReadOnly())
	if err != nil {
		t.Fatalf("read-only OpenDir of a held directory: %v", err)
	}
	if err := ro.Put(ctx, sample()); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put on a read-only store = %v; want ErrReadOnly", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s2, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatalf("OpenDir after Close: %v", err)
	}
	s2.Close()
	if _, err := OpenDir(ctx, vfs.OS{}, filepath.Join(dir, "missing"), ReadOnly()); err == nil {
		t.Error("read-only OpenDir of a missing directory succeeded")
	}
}

// TestLockHolder: LockHolder names the holder of a held directory from its
// lock file (pid, host, start), without taking the lock, and finds none in
// a directory without a lock file, or whose store was closed; the error of
// a second OpenDir names the same holder; a lock file of an older filesink
// (a pid alone) still gives the pid.
func TestLockHolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if h, err := LockHolder(ctx, dir); h != nil || err != nil {
		t.Fatalf("LockHolder of a directory without a lock file = %v, %v; want nil, nil", h, err)
	}
	s, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	h, err := LockHolder(ctx, dir)
	if err != nil || h == nil || h.PID != os.Getpid() || h.Host != host || h.Started == "" {
		t.Fatalf("LockHolder of a held directory = %+v, %v; want pid %d, host %q and a start", h, err, os.Getpid(), host)
	}
	_, err = OpenDir(ctx, vfs.OS{}, dir)
	var le *LockedError
	if !errors.As(err, &le) || le.LockInfo != *h {
		t.Fatalf("second OpenDir = %v; want a LockedError naming %+v", err, *h)
	}
	// The probe took nothing: the holder keeps the lock.
	if h, err := LockHolder(ctx, dir); h == nil || err != nil {
		t.Fatalf("LockHolder again = %v, %v; want the holder", h, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if h, err := LockHolder(ctx, dir); h != nil || err != nil {
		t.Fatalf("LockHolder after Close = %+v, %v; want nil, nil", h, err)
	}

	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("4711\n"); err != nil {
		t.Fatal(err)
	}
	if got := parseLockInfo(f); got != (LockInfo{PID: 4711}) {
		t.Errorf("an older lock file reads as %+v; want pid 4711 alone", got)
	}
	if got, want := (&LockedError{Dir: "D", LockInfo: LockInfo{PID: 4711, Host: "web-2", Started: "2026-01-02T03:04:05Z"}}).Error(),
		"checkpoint store D is locked by another process (host web-2, pid 4711, started 2026-01-02T03:04:05Z)"; got != want {
		t.Errorf("LockedError = %q; want %q", got, want)
	}
}
