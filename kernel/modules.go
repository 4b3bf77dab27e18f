package kernel

import (
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
)

// Module codes of SPEC §8.
const (
	ModuleNote       = "NOTE"
	ModuleMem        = "MEM-001"
	ModuleCommitment = "COMMITMENT"
	ModuleIdentity   = "IDENTITY"
)

// Mode is how a feature runs.
type Mode string

// Feature modes (SPEC §7).
const (
	ModeInternal       Mode = "internal"        // runs inside the transaction
	ModeDirectExternal Mode = "direct_external" // would call a provider: fails closed to blocked_external
	ModeOutbox         Mode = "outbox"          // commits a PENDING execution and an outbox message
)

// Feature is one action on a record.
type Feature struct {
	ID       string
	Name     string
	Mode     Mode
	Provider string // outbox and direct_external: the provider it would reach
	// Apply computes the new payload and the execution output of an internal feature. It must
	// be deterministic and must not write.
	Apply func(payload map[string]any, input map[string]any) (newPayload map[string]any, output map[string]any, err error)
}

// Module is one record type with its payload rule and features.
type Module struct {
	Code        string
	Description string
	// Legacy modules refuse every write before the runner or a repository runs.
	Legacy   bool
	Features []Feature
	// ValidatePayload applies the module's rules to a payload (after the JSON boundary); nil
	// accepts any object without decoding it.
	ValidatePayload func(payload map[string]any, rules RuleSnapshot) error
	// createOp is OpCreate(Code), built once by NewRegistry: every create request needs it.
	createOp string
}

// createOperation is OpCreate(m.Code).
func (m *Module) createOperation() string {
	if m.createOp != "" {
		return m.createOp
	}
	return model.OpCreate(m.Code)
}

// Feature returns the module's feature id.
func (m *Module) Feature(id string) (Feature, bool) {
	for _, f := range m.Features {
		if f.ID == id {
			return f, true
		}
	}
	return Feature{}, false
}

// Rules are the module rules that can change while the process runs (config or the TUI). They
// are read once per request in prepare; replays never read them.
type Rules struct {
	memMaxContentLength atomic.Int64
}

// RuleSnapshot is the value of the rules for one request.
type RuleSnapshot struct {
	MemMaxContentLength int
}

// NewRules returns rules with MEM-001's max content length set.
func NewRules(memMaxContentLength int) *Rules {
	r := &Rules{}
	r.SetMemMaxContentLength(memMaxContentLength)
	return r
}

// SetMemMaxContentLength changes MEM-001's rule at run time.
func (r *Rules) SetMemMaxContentLength(n int) {
	if n <= 0 {
		n = 1
	}
	r.memMaxContentLength.Store(int64(n))
}

// Snapshot reads the current rules.
func (r *Rules) Snapshot() RuleSnapshot {
	return RuleSnapshot{MemMaxContentLength: int(r.memMaxContentLength.Load())}
}

// Registry is the set of modules.
type Registry struct {
	modules map[string]*Module
	Rules   *Rules
}

// NewRegistry returns the modules of SPEC §8 with the given rules.
func NewRegistry(rules *Rules) *Registry {
	mods := []*Module{noteModule(), memModule(), commitmentModule(), identityModule()}
	reg := &Registry{modules: map[string]*Module{}, Rules: rules}
	for _, m := range mods {
		m.createOp = model.OpCreate(m.Code)
		reg.modules[m.Code] = m
	}
	return reg
}

// Module returns a module by code, or VALIDATION_FAILED naming the known ones.
func (r *Registry) Module(code string) (*Module, error) {
	if m, ok := r.modules[code]; ok {
		return m, nil
	}
	return nil, apperr.New(apperr.ValidationFailed, "module: %q is not a module (known: %s)", code, strings.Join(r.Codes(), ", "))
}

// Codes lists the module codes, sorted.
func (r *Registry) Codes() []string {
	out := make([]string, 0, len(r.modules))
	for c := range r.modules {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func noteModule() *Module {
	return &Module{
		Code:            ModuleNote,
		Description:     "plain records; payload is any JSON object",
		ValidatePayload: nil, // any object
		Features: []Feature{{
			ID: "F01", Name: "archive", Mode: ModeInternal,
			Apply: func(p map[string]any, _ map[string]any) (map[string]any, map[string]any, error) {
				out := clone(p)
				was, _ := p["archived"].(bool)
				out["archived"] = true
				return out, map[string]any{"archived": true, "wasArchived": was}, nil
			},
		}},
	}
}

func memModule() *Module {
	return &Module{
		Code:        ModuleMem,
		Description: "memory text: {originalContent, currentContent}; currentContent is limited by a rule",
		ValidatePayload: func(p map[string]any, rules RuleSnapshot) error {
			for k := range p {
				if k != "originalContent" && k != "currentContent" {
					return apperr.New(apperr.ValidationFailed, "payload.%s: MEM-001 payloads hold only originalContent and currentContent", k)
				}
			}
			for _, k := range []string{"originalContent", "currentContent"} {
				if _, ok := p[k].(string); !ok {
					return apperr.New(apperr.ValidationFailed, "payload.%s: must be a string", k)
				}
			}
			if n := utf8.RuneCountInString(p["currentContent"].(string)); n > rules.MemMaxContentLength {
				return apperr.New(apperr.ValidationFailed, "payload.currentContent: %d characters exceeds MEM-001's max_content_length of %d", n, rules.MemMaxContentLength)
			}
			return nil
		},
		Features: []Feature{
			{
				ID: "F01", Name: "rewrite", Mode: ModeInternal,
				Apply: func(p map[string]any, _ map[string]any) (map[string]any, map[string]any, error) {
					out := clone(p)
					cur, _ := p["currentContent"].(string)
					rewritten := strings.Join(strings.Fields(cur), " ")
					out["currentContent"] = rewritten
					return out, map[string]any{"charactersBefore": utf8.RuneCountInString(cur), "charactersAfter": utf8.RuneCountInString(rewritten)}, nil
				},
			},
			{ID: "F02", Name: "publish", Mode: ModeDirectExternal, Provider: "publisher"},
		},
	}
}

var commitmentStatuses = map[string]bool{"OPEN": true, "DONE": true, "CANCELLED": true}

func commitmentModule() *Module {
	return &Module{
		Code:        ModuleCommitment,
		Description: "commitments: {status: OPEN|DONE|CANCELLED, due?}; reviews record kept or missed",
		ValidatePayload: func(p map[string]any, _ RuleSnapshot) error {
			for k := range p {
				if k != "status" && k != "due" {
					return apperr.New(apperr.ValidationFailed, "payload.%s: COMMITMENT payloads hold only status and due", k)
				}
			}
			s, _ := p["status"].(string)
			if !commitmentStatuses[s] {
				return apperr.New(apperr.ValidationFailed, "payload.status: must be OPEN, DONE or CANCELLED")
			}
			if due, ok := p["due"]; ok {
				ds, isString := due.(string)
				if !isString {
					return apperr.New(apperr.ValidationFailed, "payload.due: must be a date (YYYY-MM-DD) or an RFC 3339 time")
				}
				if _, err := time.Parse("2006-01-02", ds); err != nil {
					if _, err := time.Parse(time.RFC3339, ds); err != nil {
						return apperr.New(apperr.ValidationFailed, "payload.due: %q is not a date (YYYY-MM-DD) or an RFC 3339 time", ds)
					}
				}
			}
			return nil
		},
		Features: []Feature{
			{
				ID: "F01", Name: "close", Mode: ModeInternal,
				Apply: func(p map[string]any, _ map[string]any) (map[string]any, map[string]any, error) {
					if s, _ := p["status"].(string); s != "OPEN" {
						return nil, nil, apperr.New(apperr.ValidationFailed, "record: only an OPEN commitment can be closed (it is %s)", s)
					}
					out := clone(p)
					out["status"] = "DONE"
					return out, map[string]any{"status": "DONE", "previousStatus": "OPEN"}, nil
				},
			},
			{ID: "F02", Name: "notify", Mode: ModeOutbox, Provider: "notifier"},
		},
	}
}

func identityModule() *Module {
	return &Module{
		Code:            ModuleIdentity,
		Description:     "legacy identity records: every write is disabled; old raw-json-v1 receipts stay readable",
		Legacy:          true,
		ValidatePayload: nil, // any object
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
