package filesink

// WithEvictByRolling makes the open-file limit roll the least recently
// written row part instead of releasing it (what it does to bulk parts),
// so that the benchmarks can compare the two.
func WithEvictByRolling() Option { return optionFunc(func(c *config) { c.evictRoll = true }) }
