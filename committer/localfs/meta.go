package localfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/vfs"
)

func (b *Backend) metaPath(name string) (string, error) {
	if err := driver.CheckMetaName(name); err != nil {
		return "", fmt.Errorf("localfs: %w", err)
	}
	return filepath.Join(b.root, driver.MetaDir, filepath.FromSlash(name)), nil
}

// MetaLocation implements driver.Output.
func (b *Backend) MetaLocation(name string) string {
	return filepath.Join(b.root, driver.MetaDir, filepath.FromSlash(name))
}

// PutMeta implements driver.Output: see put.
func (b *Backend) PutMeta(ctx context.Context, name string, data []byte) error {
	full, err := b.metaPath(name)
	if err != nil {
		return err
	}
	return b.put(ctx, full, data)
}

// PutFile implements driver.Output: see put.
func (b *Backend) PutFile(ctx context.Context, target string, data []byte) error {
	if err := driver.CheckHiddenName(target, checkTarget); err != nil {
		return fmt.Errorf("localfs: %w", err)
	}
	return b.put(ctx, b.abs(target), data)
}

// put publishes data as full: a temporary file beside it, fsync,
// no-replace rename, directory fsync (the directories are made durable
// first). An existing file is compared byte for byte.
func (b *Backend) put(ctx context.Context, full string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Dir(full)
	if err := vfs.MkdirAllSync(b.fs, dir); err != nil {
		return fmt.Errorf("localfs: directory %s: %w", dir, err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:])+"-"+filepath.Base(full))
	if err := vfs.WriteFileSync(b.fs, tmp, data); err != nil {
		_ = b.fs.Remove(tmp)
		return vfs.WrapPath("localfs: write "+full, err)
	}
	err := b.fs.RenameNoReplace(tmp, full)
	if err != nil {
		_ = b.fs.Remove(tmp)
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("localfs: publish %s: %w", full, err)
		}
		have, rerr := vfs.ReadFile(b.fs, full)
		if rerr != nil {
			return fmt.Errorf("localfs: publish %s: it exists and cannot be read: %w", full, rerr)
		}
		if !bytes.Equal(have, data) {
			return fmt.Errorf("localfs: publish %s: it exists with other content: %w", full, committer.ErrAlreadyExists)
		}
	}
	// Also after finding the object: the process that renamed it may have
	// died before this fsync.
	if err := b.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("localfs: publish %s: %w", full, err)
	}
	return nil
}

// GetMeta implements driver.Output.
func (b *Backend) GetMeta(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	full, err := b.metaPath(name)
	if err != nil {
		return nil, err
	}
	return vfs.ReadFile(b.fs, full)
}

// ListMeta implements driver.Output; names starting with "." (the
// temporary files of interrupted puts) are not listed.
func (b *Backend) ListMeta(ctx context.Context, dir string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	full, err := b.metaPath(dir)
	if err != nil {
		return nil, err
	}
	ents, err := b.fs.ReadDir(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, vfs.WrapPath("localfs: list "+full, err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, path.Join(dir, e.Name()))
		}
	}
	slices.Sort(names)
	return names, nil
}

// ListMetaAfter implements driver.Output: ListMeta from the first name
// greater than after on.
func (b *Backend) ListMetaAfter(ctx context.Context, dir, after string) ([]string, error) {
	names, err := b.ListMeta(ctx, dir)
	if err != nil {
		return nil, err
	}
	i, found := slices.BinarySearch(names, after)
	if found {
		i++
	}
	return names[i:], nil
}

// ListFiles implements driver.Output.
func (b *Backend) ListFiles(ctx context.Context, fn func(target string, size int64) error) error {
	return b.Walk(ctx, func(rel string, e fs.DirEntry) error {
		if n := e.Name(); n[0] == '_' || n[0] == '.' {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		return fn(rel, fi.Size())
	})
}

// OpenFile implements driver.Output.
func (b *Backend) OpenFile(ctx context.Context, target string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTarget(target); err != nil {
		return nil, err
	}
	return b.fs.Open(b.abs(target))
}

// FileLocation implements driver.Output.
func (b *Backend) FileLocation(target string) string { return b.abs(target) }
