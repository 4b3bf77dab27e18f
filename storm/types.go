package storm

import "github.com/idemwork/idemwork/storm/stormtypes"

// A storm's spec, events, lock samples and summary are plain data of package stormtypes (the
// Storm view uses them without the database); these names are the same types.
type (
	Op             = stormtypes.Op
	Spec           = stormtypes.Spec
	Event          = stormtypes.Event
	Summary        = stormtypes.Summary
	ErrorSample    = stormtypes.ErrorSample
	Distinct       = stormtypes.Distinct
	Latency        = stormtypes.Latency
	Setup          = stormtypes.Setup
	ProcessSummary = stormtypes.ProcessSummary
	ServerSummary  = stormtypes.ServerSummary
	Verified       = stormtypes.Verified
	Reference      = stormtypes.Reference
	Unread         = stormtypes.Unread
	Verdict        = stormtypes.Verdict
	Part           = stormtypes.Part
	LockSample     = stormtypes.LockSample
	Blocker        = stormtypes.Blocker
	LockStats      = stormtypes.LockStats
)

// The operations a storm can fire.
const (
	OpCreate  = stormtypes.OpCreate
	OpPatch   = stormtypes.OpPatch
	OpAction  = stormtypes.OpAction
	OpService = stormtypes.OpService
)

// How requests reach the kernel.
const (
	ViaInproc = stormtypes.ViaInproc
	ViaHTTP   = stormtypes.ViaHTTP
)

// Limits and defaults of a storm.
const (
	MaxRequests        = stormtypes.MaxRequests
	MaxProcesses       = stormtypes.MaxProcesses
	MaxConcurrency     = stormtypes.MaxConcurrency
	DefaultConcurrency = stormtypes.DefaultConcurrency
	MaxServers         = stormtypes.MaxServers
	MaxHold            = stormtypes.MaxHold
)

// Codes a storm reports besides the kernel's.
const (
	CodeInjectedFault = stormtypes.CodeInjectedFault
	CodeNoResponse    = stormtypes.CodeNoResponse
	CodeCancelled     = stormtypes.CodeCancelled
	CodeHTTPError     = stormtypes.CodeHTTPError
	CodeDisagrees     = stormtypes.CodeDisagrees
)

// The verdicts of a storm.
const (
	VerdictAgrees    = stormtypes.VerdictAgrees
	VerdictRejected  = stormtypes.VerdictRejected
	VerdictFailed    = stormtypes.VerdictFailed
	VerdictDisagrees = stormtypes.VerdictDisagrees
	VerdictStopped   = stormtypes.VerdictStopped
)

// SampleEvery is how often a storm samples its own sessions' locks.
const SampleEvery = stormtypes.SampleEvery

// AppNamePrefix is how every database session of storm id starts its application_name.
func AppNamePrefix(id string) string { return stormtypes.AppNamePrefix(id) }

// OrderedOutcomes lists the keys of counts for display: EXECUTED, REPLAYED, JOINED, then error
// codes by name.
func OrderedOutcomes(counts map[string]int) []string { return stormtypes.OrderedOutcomes(counts) }

// Percentile is the nearest-rank percentile p (0-100) of sorted values (0 for none).
func Percentile(sorted []float64, p float64) float64 { return stormtypes.Percentile(sorted, p) }

func randomHex(n int) string { return stormtypes.RandomHex(n) }
