package model

// Operations of SPEC §4.1.

// OpCreate is the operation of creating a record of module.
func OpCreate(module string) string { return module + ":record:create" }

// OpPatch is the operation of patching a record.
func OpPatch(module, recordID string) string { return module + ":record:" + recordID + ":patch" }

// OpFeature is the operation of running a feature on a record.
func OpFeature(module, recordID, featureID string) string {
	return module + ":record:" + recordID + ":feature:" + featureID
}
