package driver

import (
	"fmt"
	"path"
	"strings"
)

// CheckMetaName returns an error unless name is a clean, relative,
// slash-separated metadata name (driver.Output) that stays inside MetaDir.
func CheckMetaName(name string) error {
	clean := path.Clean(name)
	if name == "" || clean != name || path.IsAbs(name) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("invalid metadata name %q", name)
	}
	return nil
}

// CheckHiddenName returns an error unless target is DIR/_NAME or _NAME: a
// hidden file (Output.PutFile) in a directory where part files may be,
// DIR being checked by checkDir, the backend's check of a target path.
func CheckHiddenName(target string, checkDir func(string) error) error {
	dir, base := path.Split(target)
	if base == "" || base[0] != '_' || strings.ContainsAny(base, "\\\x00") {
		return fmt.Errorf("invalid hidden file name %q", target)
	}
	if dir == "" {
		return nil
	}
	return checkDir(strings.TrimSuffix(dir, "/"))
}
