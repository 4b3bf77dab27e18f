package views

import "github.com/idemwork/idemwork/model"

// What the external tests read of the views' insides (compiled into the tests only).

// Steps are the steps each walk-through ran so far.
func (v *Demo) Steps() (blocked, outbox []model.DemoStep) { return v.blockedSteps, v.outboxSteps }

// Comparison is the side-by-side comparison shown (nil before it is read).
func (v *Demo) Comparison() *model.ModeComparison { return v.compare }

// Errs are the error lines of the walk-throughs and the comparison.
func (v *Demo) Errs() (blocked, outbox, compare string) {
	return v.errs[partBlocked], v.errs[partOutbox], v.errs[partCompare]
}

// PaneAt is the pane's scroll offset and whether it shows its bottom.
func (v *Demo) PaneAt() (int, bool) { return v.pane.vp.YOffset, v.pane.vp.AtBottom() }

// Safe is how the views escape stored text for the screen.
func Safe(s string) string { return safe(s) }
