package errorfs_test

import (
	"fmt"

	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
	"github.com/filesink/filesink/vfs/errorfs"
)

// A crash loop: crash before the k-th operation for k = 1, 2, ... until the
// run completes, and check the state a power loss would leave each time.
func Example() {
	publish := func(fsys vfs.FS) error {
		if err := vfs.WriteFileSync(fsys, "/tmp", []byte("data")); err != nil {
			return err
		}
		if err := fsys.RenameNoReplace("/tmp", "/final"); err != nil {
			return err
		}
		return fsys.SyncDir("/")
	}
	for k := int64(1); ; k++ {
		mem := crashfs.New()
		efs := errorfs.Wrap(mem, errorfs.OnIndex(k))
		err := publish(efs)
		if !efs.Fired() {
			fmt.Printf("completed after %d operations: %v\n", efs.Ops(), err)
			break
		}
		op, _ := efs.FirstInjected()
		data, rerr := vfs.ReadFile(mem.CrashCloneSynced(), "/final")
		fmt.Printf("crash at %v: final %q, missing %v\n", op, data, rerr != nil)
	}
	// Output:
	// crash at #1 create /tmp: final "", missing true
	// crash at #2 write /tmp: final "", missing true
	// crash at #3 sync /tmp: final "", missing true
	// crash at #4 close /tmp: final "", missing true
	// crash at #5 rename /tmp -> /final: final "", missing true
	// crash at #6 syncdir /: final "", missing true
	// completed after 6 operations: <nil>
}
