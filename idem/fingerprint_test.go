package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// Known answers of fingerprint version 1, computed by the runner as it was at 7a46dc3 (before
// versions existed) over the bodies the kernel built then. Rows in the field carry these values;
// FingerprintV1 must give them for ever.
var v1Vectors = []struct{ op, body, fp string }{
	{"NOTE:record:create", `{"title":"hello"}`, "daea1c376ad273a617ef9d00be030da52d5a63e9922fd6c3d28f45037b0767ca"},
	{"NOTE:record:create", `{"payload":{},"summary":"","title":"hello"}`, "e4ecbc159d1855a3901bc4d68ea3a80d8173da740d468fd4712bed0ed8dcec1a"},
	{"NOTE:record:create", `{"payload":{"text":"call the plumber","priority":2,"tags":["home","todo"]},"title":"bench note"}`, "d19a251f6105cecd3daeede9b6681444f1f2267d273a1b15d1937d45ba51d948"},
	{"NOTE:record:create", `{"payload":{"b":1e3,"a":[1.0,-0,"\u003c\u0026\u003e"]},"summary":"line1\nline2","title":"n"}`, "47841a0378da75a3e7875cfd66b698e36d5919a4d78e92108a58d903c3066535"},
	{"NOTE:record:01J0000000000000000000000A:patch", `{"expectRevision":3,"payload":{"k":[1,2]},"title":"t2"}`, "4cfa118ac997bbc1f0ecc37ab2947a394be8265923e4bf39dd21ed1dd9a9bb3c"},
	{"NOTE:record:01J0000000000000000000000A:patch", `{"expectRevision":1}`, "c57c57c123ca4bffdc64ff44349d7089eda62ed85e64f10815cdef50d29714ec"},
	{"MEM-001:record:01J0000000000000000000000A:feature:F01", `{}`, "6defd123e25b23dc0b80db1cd235ffe39c3d1992e21548ff52027e58af13157d"},
	{"MEM-001:record:01J0000000000000000000000A:feature:F01", `{"input":{}}`, "0918beec9ce56cd6e7a870ea2bfc60c1c4ac8dc71a99f46b15cd0dbfb91c19d0"},
	{"MEM-001:record:01J0000000000000000000000A:feature:F01", `{"input":{"b":2,"a":1}}`, "47a191218ccaaa9701b72a703a0c9e9221f1da0c76b47960181b77021ba0b12f"},
	{"COMMITMENT:record:01J0000000000000000000000A:review:create", `{"comment":"done \u003con time\u003e","verdict":"kept"}`, "095b37657721f9cc184480dad92bb5f30c5c77d2935dfcd6213c1bc1e7e9b0d2"},
}

func TestFingerprintV1KnownAnswers(t *testing.T) {
	for _, v := range v1Vectors {
		got, err := FingerprintV1(v.op, []byte(v.body))
		require.NoError(t, err)
		require.Equal(t, v.fp, got, "%s %s", v.op, v.body)
		require.Equal(t, 1, FingerprintVersion(got))
	}
}

// Known answers of version 2 over canonical bodies.
var v2Vectors = []struct{ op, body, fp string }{
	{"NOTE:record:create", `{"title": "hello"}`, "v2:7ba65841650b2d4efd3f82ba4e1d96f30afc938a0d23b75035f405944b95edef"},
	{"NOTE:record:create", `{"title": "hello", "payload": {}, "summary": ""}`, "v2:2fb5d82f3297a16a73932b9a91d4a8bbe0971e3ac2688e4ce8b6a0f2bb900fcd"},
	{"NOTE:record:create", `{"title": "n", "payload": {"a": [1.0, 0, "<&>"], "b": 1000}, "summary": "line1\nline2"}`, "v2:e3d3f2b17157d8a63c96207f79a9159f644dbdec61cfc46421bba19c408595bd"},
	{"NOTE:record:01J0000000000000000000000A:patch", `{"title": "t2", "payload": {"k": [1, 2]}, "expectRevision": 3}`, "v2:fe27f31c266be95d46f4507b7fe52aeb3ce13d76e519c01719ffcdfe61200d71"},
	{"MEM-001:record:01J0000000000000000000000A:feature:F01", `{}`, "v2:c5424a1aec300604ee584e7d7494aaa4557878fa245e20d6c6ebab15c6d49180"},
	{"COMMITMENT:record:01J0000000000000000000000A:review:create", `{"comment": "done <on time>", "verdict": "kept"}`, "v2:e1fae8771f23e4920d6829e4ba0eb09c137aea0cb57cfdcf91bc003516cc3699"},
	{"", ``, "v2:ce6e62e9f150127a7b943ddd19c5de03e53ef2eaced063e3a2b51db7f797b48d"},
}

func TestFingerprintV2KnownAnswers(t *testing.T) {
	for _, v := range v2Vectors {
		got := Fingerprint(v.op, []byte(v.body))
		require.Equal(t, v.fp, got, "%s %s", v.op, v.body)
		require.Equal(t, 2, FingerprintVersion(got))
	}
}

// TestFingerprintV2IsTheLengthPrefixedTuple spells the definition out byte by byte.
func TestFingerprintV2IsTheLengthPrefixedTuple(t *testing.T) {
	op, body := "NOTE:record:create", `{"title": "hello"}`
	var msg []byte
	for _, part := range []string{"idemwork.fingerprint.v2", op, body} {
		msg = append(msg, 0, 0, 0, 0, 0, 0, 0, byte(len(part)))
		msg = append(msg, part...)
	}
	sum := sha256.Sum256(msg)
	require.Equal(t, "v2:"+hex.EncodeToString(sum[:]), Fingerprint(op, []byte(body)))
	// The lengths keep the parts apart: moving a byte from operation to body changes the value.
	require.NotEqual(t, Fingerprint("ab", []byte("c")), Fingerprint("a", []byte("bc")))
}

func TestFingerprintVersions(t *testing.T) {
	require.Equal(t, 0, FingerprintVersion(""))
	require.Equal(t, 0, FingerprintVersion("v3:abc"))
	require.Equal(t, 0, FingerprintVersion("DAEA1C376AD273A617EF9D00BE030DA52D5A63E9922FD6C3D28F45037B0767CA"))
}

func TestAStoredFingerprintIsComparedByItsVersionsRule(t *testing.T) {
	v1 := v1Vectors[0]
	req := Request{Key: "k", Operation: v1.op, Body: []byte(`{"title": "hello"}`),
		BodyV1: func() ([]byte, error) { return []byte(`{"title":"hello"}`), nil }}
	fp := Fingerprint(req.Operation, req.Body)
	same, err := sameRequest(v1.fp, req, fp)
	require.NoError(t, err)
	require.True(t, same, "a version 1 row is compared by version 1's rule, not mismatched against v2")
	same, err = sameRequest(fp, req, fp)
	require.NoError(t, err)
	require.True(t, same)
	other := req
	other.BodyV1 = func() ([]byte, error) { return []byte(`{"title":"bye"}`), nil }
	same, err = sameRequest(v1.fp, other, fp)
	require.NoError(t, err)
	require.False(t, same)
	_, err = sameRequest("v9:0000", req, fp)
	require.Error(t, err, "an unknown version fails closed")
}
