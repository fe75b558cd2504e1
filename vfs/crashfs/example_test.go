package crashfs_test

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

// A file that was synced but whose directory was not is lost by a crash
// that keeps only the durable state.
func Example() {
	m := crashfs.New()
	if err := vfs.MkdirAllSync(m, "/out"); err != nil {
		panic(err)
	}
	if err := vfs.WriteFileSync(m, "/out/a", []byte("hello")); err != nil {
		panic(err)
	}

	_, err := m.CrashCloneSynced().Stat("/out/a")
	fmt.Println("before SyncDir, lost:", errors.Is(err, fs.ErrNotExist))

	if err := m.SyncDir("/out"); err != nil {
		panic(err)
	}
	data, err := vfs.ReadFile(m.CrashClone(1), "/out/a")
	fmt.Printf("after SyncDir: %q %v\n", data, err)
	// Output:
	// before SyncDir, lost: true
	// after SyncDir: "hello" <nil>
}
