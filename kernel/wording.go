package kernel

// Label names a feature with its mode and what a run of it commits, for pickers and help:
// "F02 publish · direct_external → blocked".
func (f Feature) Label() string {
	s := f.ID + " " + f.Name + " · " + string(f.Mode)
	switch f.Mode {
	case ModeDirectExternal:
		s += " → blocked"
	case ModeOutbox:
		s += " → queued for the worker"
	}
	return s
}
