package mysqlxa

// SetHook installs a crash point inside the sink's own steps ("xa-ended":
// after XA END, before XA PREPARE).
func SetHook(s *Sink, h func(point string) error) { s.hook = h }
