package views_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/views"
)

func TestAJSONDiffNamesEachChangedPathNotEachLine(t *testing.T) {
	t.Parallel()
	changes := views.JSONDiff(
		[]byte(`{"title":"a","payload":{"i":7,"items":["x","y"],"gone":true,"odd key":1}}`),
		[]byte(`{"title":"a","payload":{"i":8,"items":["x","z","w"],"new":{"deep":[1]},"odd key":1}}`))
	var got []string
	for _, c := range changes {
		got = append(got, string(c.Kind)+" "+c.Path+" "+c.Old+" "+c.New)
	}
	require.Equal(t, []string{
		`- payload.gone true `,
		`~ payload.i 7 8`,
		`~ payload.items[1] "y" "z"`,
		`+ payload.items[2]  "w"`,
		`+ payload.new.deep[0]  1`,
	}, got, "a changed value is one change, whatever its neighbours' commas")
	require.Empty(t, views.JSONDiff([]byte(`{"a":1,"b":2}`), []byte(`{"b":2, "a":1}`)), "key order is no change")
	require.Equal(t, `payload["odd key"]`, views.JSONDiff([]byte(`{"payload":{"odd key":1}}`), []byte(`{"payload":{"odd key":2}}`))[0].Path)

	long := strings.Repeat("lorem ipsum ", 5000)
	c := views.JSONDiff([]byte(`{"t":"`+long+`end"}`), []byte(`{"t":"`+long+`END"}`))
	require.Len(t, c, 1)
	require.Len(t, c[0].Text, 1, "a 60 KB text shows the one edit")
	require.Contains(t, c[0].Text[0], "[-end-]{+END+}")

	ml := views.JSONDiff([]byte(`{"t":"one\ntwo\nthree"}`), []byte(`{"t":"one\n2\nthree"}`))
	require.Contains(t, strings.Join(ml[0].Text, "\n"), "-two\n+2")
}

// frameBytes is how many bytes drawing one frame allocates, on average.
func frameBytes(view func() string) uint64 {
	const n = 50
	view()
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	for i := 0; i < n; i++ {
		_ = view()
	}
	runtime.ReadMemStats(&b)
	return (b.TotalAlloc - a.TotalAlloc) / n
}

// Nothing a frame allocates grows with the payload: the JSON is painted, wrapped and diffed in
// Update when the selection changes, and a frame draws the visible lines only.
func TestAFrameAllocatesNoMoreForA60KBPayloadThanForASmallOne(t *testing.T) {
	src := &records{}
	bigRecordIn(src, bigID, 20, 60)
	bigRecordIn(src, "01JSMA11000000000000000000", 20, 1)
	measure := func(id, mode string) uint64 {
		v := views.NewRecords(plainCtx(), src)
		v.SetSize(103, 37)
		settle(t, v.Update, v.OpenRecord("NOTE", id))
		settle(t, v.Update, v.Update(keyPress(mode)))
		require.NotContains(t, v.View(), "reading revision")
		return frameBytes(v.View)
	}
	for _, mode := range []string{"1", "2"} {
		small, large := measure("01JSMA11000000000000000000", mode), measure(bigID, mode)
		t.Logf("mode %s: %d bytes per frame with 1 KB payloads, %d with 60 KB", mode, small, large)
		require.Less(t, large, small*3/2+4096, "mode %s: a 60 KB payload must not cost a frame more", mode)
		require.Less(t, large, uint64(512<<10), "mode %s: a frame allocates little", mode)
	}
}
