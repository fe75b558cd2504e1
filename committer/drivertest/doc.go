// Package drivertest is the conformance suite for [driver.Backend]
// implementations: one set of cases, run against the local filesystem, the
// crash-simulating filesystem, S3 (MinIO) and every backend added later, in
// the manner of go-cloud's blob/drivertest.
//
// # Use
//
// A backend's test package calls [RunConformanceTests] with a function that
// makes a [Harness] over a fresh, empty store:
//
//	func TestConformance(t *testing.T) {
//		drivertest.RunConformanceTests(t, func(t *testing.T) drivertest.Harness {
//			return newMyHarness(t) // registers its cleanup with t.Cleanup
//		})
//	}
//
// Every case is a subtest with its own harness, so a failure names the rule
// that was broken, and all cases run even when one fails.
//
// # Capabilities
//
// Some cases need more than the backend itself:
//
//   - Crash: [Harness.Crash] returns a harness over what the store holds
//     after a power loss at that instant. A harness that cannot simulate a
//     power loss returns ok=false, and every crash case is skipped with a
//     message naming the capability ("Crash").
//   - Tamper: [Harness.Tamper] returns hooks that delete or shorten staging
//     data and delete or plant finished targets behind the backend's back,
//     to drive the data-loss and no-clobber paths. Without it those cases
//     are skipped naming "Tamper".
//
// A skipped case is never a pass: run `go test -v` to see which capabilities
// a harness lacks.
//
// # What the suite checks
//
// The rules of driver.Backend (with its driver.Output) and
// driver.PartWriter, each a "must":
// exactly the written bytes are published and nothing is visible before
// Commit; Commit is idempotent and verified (ErrDataLoss when neither the
// staging data nor a matching target exists, ErrAlreadyExists and no
// clobber when another file holds the target); Resume continues exactly
// after the recorded bytes and reports missing or short staging data as
// ErrDataLoss; Sweep deletes only this namespace's unreferenced staging
// data; PersistAsync records exactly the bytes written before it; the
// metadata objects are published at most once and listed sorted (from a
// name on with ListMetaAfter); ListFiles visits exactly the finished files;
// every recorded length survives a power loss (docs/architecture.md,
// invariants 1 to 6); and the backend is safe for concurrent use.
//
// Part names used by the suite follow the file sink's naming,
// "<prefix>-<subtask>-<run>-<counter>[.ext]", and the namespace given to
// Sweep is "<prefix>-<subtask>-".
package drivertest
