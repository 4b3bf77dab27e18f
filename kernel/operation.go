package kernel

import (
	"strings"

	"github.com/idemwork/idemwork/apperr"
)

// OpKind is the kind of write an operation names.
type OpKind string

// Operation kinds of SPEC §4.1.
const (
	OpKindCreate  OpKind = "create"
	OpKindPatch   OpKind = "patch"
	OpKindFeature OpKind = "feature"
	OpKindReview  OpKind = "review"
	OpKindLegacy  OpKind = "legacy"
)

// Operation is a parsed operation string.
type Operation struct {
	Kind      OpKind
	Module    string
	RecordID  string
	FeatureID string
}

// ParseOperation reads an operation string back into its parts.
func ParseOperation(op string) (Operation, error) {
	if op == OpLegacyIdentityCreate {
		return Operation{Kind: OpKindLegacy, Module: ModuleIdentity}, nil
	}
	parts := strings.Split(op, ":")
	bad := apperr.New(apperr.ValidationFailed, "operation %q is not one of the forms of SPEC §4.1", op)
	if len(parts) < 3 || parts[1] != "record" {
		return Operation{}, bad
	}
	switch {
	case len(parts) == 3 && parts[2] == "create":
		return Operation{Kind: OpKindCreate, Module: parts[0]}, nil
	case len(parts) == 4 && parts[3] == "patch":
		return Operation{Kind: OpKindPatch, Module: parts[0], RecordID: parts[2]}, nil
	case len(parts) == 5 && parts[3] == "feature":
		return Operation{Kind: OpKindFeature, Module: parts[0], RecordID: parts[2], FeatureID: parts[4]}, nil
	case len(parts) == 5 && parts[3] == "review" && parts[4] == "create" && parts[0] == ModuleCommitment:
		return Operation{Kind: OpKindReview, Module: parts[0], RecordID: parts[2]}, nil
	}
	return Operation{}, bad
}
