package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Bodies are decoded on every write request: these measure the decoding alone (the body read
// from memory, no server).
var benchBodies = []struct {
	name, body string
	patch      bool
}{
	{"create-small", `{"title":"bench note","summary":"a line","payload":{"tags":["home","todo"],"text":"call the plumber about the kitchen tap","priority":2}}`, false},
	{"create-4KiB", `{"title":"bench note","payload":{"text":"` + strings.Repeat("word ", 800) + `","n":[1,2,3,{"a":null}]}}`, false},
	{"patch", `{"expectRevision":3,"title":"renamed","summary":null,"payload":{"text":"x"}}`, true},
}

func BenchmarkDecodeBody(b *testing.B) {
	a := &API{opts: Options{MaxBodyBytes: 1 << 20}}
	for _, c := range benchBodies {
		body := []byte(c.body)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
				var err error
				if c.patch {
					var p PatchBody
					err = a.decodeBody(r, false, &p)
				} else {
					var cb CreateBody
					err = a.decodeBody(r, false, &cb)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
