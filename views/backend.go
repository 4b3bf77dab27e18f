package views

// Backend is every reader and writer the workbench's views use, each declared by the view that
// uses it. cli wires it over the store, the kernel and the outbox worker (internal/workbench),
// with errors already in the coded form views show; a test hands a view only what it needs.
type Backend struct {
	Records    RecordReader
	Keys       KeySource
	Executions ExecutionReader
	Audit      AuditReader
	History    HistoryReader
	Sessions   SessionReader
	Outbox     OutboxTools
	Writer     Writer
	Latest     LatestReader
	Catalog    Catalog
	Storm      StormRunner
	Reuse      ReuseExplainer
	Demo       DemoRunner
	Verify     InvariantChecker
	// Cluster reads the servers behind the database (nil: no Cluster view).
	Cluster ClusterReader
}

// Form is what a write form writes and reads through.
func (b Backend) Form() FormDeps {
	return FormDeps{Writer: b.Writer, Records: b.Latest, Catalog: b.Catalog}
}

// StormDeps is what the Storm view fires storms with and reads its target through.
func (b Backend) StormDeps() StormDeps {
	return StormDeps{Run: b.Storm, Records: b.Latest, Catalog: b.Catalog, Reuse: b.Reuse}
}
