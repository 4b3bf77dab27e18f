// Package uictx is the workbench's shared program context: terminal size, theme, key map,
// clock, the session's connection and write gate, handed to every view (gh-dash style), plus
// the messages views and the shell exchange. It lies below both: views and the shell (tui)
// import it, and it imports neither. It holds no database handle: views read and write through
// the small interfaces each declares, wired in cli.
package uictx

import (
	"time"
)

// Conn describes the connection for the header.
type Conn struct {
	Embedded bool
	Display  string // "embedded /var/lib/idemwork/pg" or a host; never a password
	// DataDir is the embedded cluster's data directory, the session's --data-dir ("" for a
	// database at a URL): what a stopped cluster is started with.
	DataDir  string
	Database string
	ReadOnly bool
	// ReadOnlyReason is why writes are refused ("hot standby", "read-only session", …).
	ReadOnlyReason string
}

// Clock is the workbench's clock: the runner's, which keys expire by, and which the shell can
// move ahead to show expiry.
type Clock interface {
	Now() time.Time
	Advance(d time.Duration)
	Reset()
	Offset() time.Duration
}

// WriteGate says whether this session may write.
type WriteGate interface {
	// WriteRefusal is the coded error a write gets on this session, nil when it may write.
	WriteRefusal() error
}

// ReplicationWatch says what the database's replication promises, as last read (the session
// reads it again every few seconds).
type ReplicationWatch interface {
	// ReplicationRisk is how acknowledged keys can be lost on failover ("" when they cannot).
	ReplicationRisk() string
}

// ProgramContext is shared by the shell and every view. It is only mutated in Update (Bubble
// Tea's single goroutine); commands copy what they need before running.
type ProgramContext struct {
	// Size of the main pane a view draws into.
	Width, Height int
	Styles        Styles
	Keys          KeyMap

	Conn Conn
	// Writes refuses writes on a read-only session (nil: every write is refused).
	Writes WriteGate
	// Clock is the runner's clock (nil: the system clock, which cannot be moved).
	Clock Clock
	// Replication warns the header when acknowledged keys can be lost on failover (nil: never).
	Replication ReplicationWatch

	Owner string
	// Health is whether the database answers (nil: not tracked).
	Health *Health
	// ExportDir is where Timeline's x writes its CSV ("" the working directory, else the
	// temporary directory when that cannot be written).
	ExportDir string
	// NowFunc, when set, replaces the clock for display (tests pin it for golden screens).
	NowFunc func() time.Time
}

// ReadOnly reports whether writes are refused.
func (c *ProgramContext) ReadOnly() bool {
	return c.Conn.ReadOnly || c.Writes == nil || c.Writes.WriteRefusal() != nil
}

// ReadOnlyMessage is what a refused write says: the session's own reason (a hot standby says
// writes go to the primary) with its code.
func (c *ProgramContext) ReadOnlyMessage() string {
	if c.Writes != nil {
		if err := c.Writes.WriteRefusal(); err != nil {
			return err.Error()
		}
	}
	return "READ_ONLY: this session is read-only; reconnect with --allow-writes to write"
}

// UnreachableText is what every view says when the database cannot be reached: the coded
// fact, which database, and what to do — for the embedded cluster the command that starts the
// one this session uses (its --data-dir: as root, a bare `idemwork db start` would start the
// default cluster instead).
func (c *ProgramContext) UnreachableText() string {
	const fact = "DATABASE_UNAVAILABLE: the database is not reachable (stopped, or the connection dropped)"
	switch {
	case c.Conn.DataDir != "":
		return fact + ": start it with idemwork --data-dir " + c.Conn.DataDir + " db start, or restart the workbench; r refreshes every view"
	case c.Conn.Display != "":
		return fact + " at " + c.Conn.Display + ": check that it is up; r refreshes every view"
	}
	return fact + ": start it, or restart the workbench; r refreshes every view"
}

// Now is the workbench clock (the runner's, possibly moved).
func (c *ProgramContext) Now() time.Time {
	if c.NowFunc != nil {
		return c.NowFunc()
	}
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

// Messages shared between views and the shell.

// StatusMsg flashes a line in the footer.
type StatusMsg struct {
	Text  string
	Error bool
}

// OwnerChangedMsg tells every view the owner changed: drop state and reload.
type OwnerChangedMsg struct{}

// DataChangedMsg tells views that a write happened: reload what they show.
type DataChangedMsg struct{}

// JumpKind is a jump target.
type JumpKind int

// Jump targets.
const (
	JumpRecord JumpKind = iota
	JumpKey
)

// JumpMsg asks the shell to open a record or a key in its view.
type JumpMsg struct {
	Kind   JumpKind
	Module string // for records; "" looks the record up by id
	ID     string
}

// OpenFormMsg asks the shell to open a write form.
type OpenFormMsg struct {
	Kind      string // create | patch | action
	Module    string
	RecordID  string
	Revision  int
	FeatureID string
}

// OpenStormMsg asks the shell to switch to the Storm view prepared for a record.
type OpenStormMsg struct {
	Module   string
	RecordID string
	Revision int
}
