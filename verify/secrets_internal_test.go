package verify

import "testing"

func TestTheSecretPrefilterLetsThroughEveryTextAPatternMatches(t *testing.T) {
	v := &verifier{}
	for _, text := range []string{`{"h":"Authorization: BEARER abcdefghijkl"}`, `{"dsn":"PostgreSQL://u:p@h/d"}`, `{"c":"host=x PassWord = y"}`,
		`{"c":"sslpassword=y"}`, `{"c":"passfile=/x"}`, `{"c":"paſſword=y"}`} {
		if v.secretIn(text, false, nil) == "" {
			t.Errorf("%s: no secret found", text)
		}
	}
	for _, text := range []string{`{"policy":"record-snapshot-reference-v1","result":{"recordId":"01J","revision":1}}`, `{"operation":"NOTE:record:create"}`} {
		if got := v.secretIn(text, true, nil); got != "" {
			t.Errorf("%s: %s", text, got)
		}
	}
	if !containsFoldASCII("xxBeArErx", "bearer") || containsFoldASCII("beare", "bearer") || containsFoldASCII("", "pass") {
		t.Error("containsFoldASCII")
	}
}
