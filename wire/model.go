package wire

import (
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
)

// Response is one answer as a client receives it (model.Response: plain data the views show
// without importing the wire format's builders).
type Response = model.Response

// Headers of a write's response (SPEC §10.3).
const (
	HeaderReplayed   = idemtype.HeaderReplayed
	HeaderOutcome    = idemtype.HeaderOutcome
	OutcomeUnknown   = idemtype.OutcomeUnknown
	HeaderWaited     = idemtype.HeaderWaited
	HeaderRetryAfter = model.HeaderRetryAfter
)
