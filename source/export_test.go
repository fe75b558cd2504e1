package source

// PathSet returns the summary of paths that positions written before the
// summary of the files read held ("before": {"set": ...}).
func PathSet(paths []string) string {
	s := summarize(paths)
	return s.encode()
}
