// Package ci tells the test harnesses whether they run in CI, where a
// component a test cannot reach fails the test instead of skipping it.
package ci

import (
	"os"
	"strconv"
)

// Enabled reports whether CI is set to a true value (CI=true, as .ci/run
// sets it). A value that is not a boolean counts as true, so a test fails
// rather than skips when in doubt.
func Enabled() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}
