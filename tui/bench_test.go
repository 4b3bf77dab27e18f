package tui_test

// Speed of the workbench on a big owner (make bench, or go test -run '^$' -bench . ./tui):
// keypress → frame is Update plus View for the key, as Bubble Tea does before it draws; a
// query the key started (a page, a snapshot) comes back later as a message, and message → frame
// is timed the same way. Targets: p99 of both ≤ 16 ms; a frame's allocations do not grow with
// the payload; the first frame of a cold start says what is prepared within 100 ms.

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/tui"
)

const benchOwner = "big"

var (
	benchOnce sync.Once
	benchDB   *testdb.DB
)

// benchBundle is a workbench over one database seeded once per test binary: owner "big" with
// 100,000 records, 100,000 keys, 1,000,000 audit events and 10,000 executions, and one record
// of 200 revisions with a 60 KB payload each.
func benchBundle(b *testing.B) tuitest.Bundle {
	b.Helper()
	benchOnce.Do(func() {
		benchDB = testdb.New(b)
		start := time.Now()
		for _, q := range []string{
			`INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
				SELECT 'big', '01JBENCH' || lpad(g::text, 18, '0'), 'NOTE', 1, 'note ' || g, '', '{"n": 1}',
					timestamptz '2026-01-01' + g * interval '1 second', timestamptz '2026-01-01' + g * interval '1 second'
				FROM generate_series(1, 100000) g`,
			`INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
				SELECT 'big', '01JBENCH' || lpad(g::text, 18, '0'), 1,
					jsonb_build_object('id', '01JBENCH' || lpad(g::text, 18, '0'), 'ownerId', 'big', 'moduleCode', 'NOTE', 'revision', 1,
						'title', 'note ' || g, 'summary', '', 'payload', '{"n": 1}'::jsonb, 'createdAt', '2026-01-01T00:00:00Z', 'updatedAt', '2026-01-01T00:00:00Z'),
					'k' || g, timestamptz '2026-01-01' + g * interval '1 second'
				FROM generate_series(1, 100000) g`,
			`INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
				SELECT 'big', 'k' || g, 'NOTE:record:create', repeat('f', 64), 'SUCCEEDED',
					jsonb_build_object('schemaVersion', 1, 'policy', 'record-snapshot-reference-v1',
						'result', jsonb_build_object('recordId', '01JBENCH' || lpad(g::text, 18, '0'), 'revision', 1)),
					timestamptz '2026-01-01' + g * interval '1 second', timestamptz '2126-01-01', timestamptz '2026-01-01'
				FROM generate_series(1, 100000) g`,
			`INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, idempotency_key, created_at, updated_at)
				SELECT 'big', 'x' || lpad(g::text, 25, '0'), 'NOTE', '01JBENCH' || lpad(g::text, 18, '0'), 'F01', 'internal', 'SUCCEEDED', 1,
					'x' || g, timestamptz '2026-01-01' + g * interval '1 second', timestamptz '2026-01-01'
				FROM generate_series(1, 10000) g`,
			`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, idempotency_key, detail, at)
				SELECT 'big', 'a' || lpad(g::text, 25, '0'), 'NOTE', '01JBENCH' || lpad((1 + g % 100000)::text, 18, '0'),
					CASE WHEN g % 10 = 0 THEN 'RECORD_CREATED' ELSE 'RECORD_PATCHED' END, 1, 'k' || (1 + g % 100000), '{}',
					timestamptz '2026-01-01' + g * interval '100 ms'
				FROM generate_series(1, 1000000) g`,
			`INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
				VALUES ('big', '01JBXG00000000000000000000', 'NOTE', 200, 'sixty', '', '{}', timestamptz '2027-01-01', timestamptz '2027-01-01')`,
			`INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
				SELECT 'big', '01JBXG00000000000000000000', r, jsonb_build_object('id', '01JBXG00000000000000000000', 'ownerId', 'big',
					'moduleCode', 'NOTE', 'revision', r, 'title', 'sixty', 'summary', '',
					'payload', jsonb_build_object('i', r, 'text', repeat('lorem ipsum dolor ', 3300) || ' rev ' || r,
						'items', (SELECT jsonb_agg(x) FROM generate_series(1, r % 7 + 1) x))),
					'sixty-' || r, timestamptz '2027-01-01' + r * interval '1 second'
				FROM generate_series(1, 200) r`,
			`ANALYZE`,
		} {
			if _, err := benchDB.Pool.Exec(context.Background(), q); err != nil {
				b.Fatalf("seed: %v", err)
			}
		}
		b.Logf("seeded the big owner in %s", time.Since(start).Round(time.Millisecond))
	})
	bundle := tuitest.NewOver(benchDB)
	bundle.Ctx.Owner = benchOwner
	return bundle
}

// latencies collects frame times.
type latencies []time.Duration

func (l latencies) report(b *testing.B, name string) {
	if len(l) == 0 {
		return
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	q := func(p float64) float64 {
		return float64(l[min(len(l)-1, int(p*float64(len(l))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
	b.ReportMetric(float64(l[len(l)-1].Microseconds())/1000, name+"-max-ms")
}

// drive sends keys round-robin for b.N keypresses, timing each keypress → frame, then runs the
// commands the key started (outside the timer: that is the database's time) and times each
// message → frame they produce.
func drive(b *testing.B, m *tui.Model, keys []tea.Msg) {
	var press, msgs latencies
	var pending []tea.Cmd
	run := func(cmd tea.Cmd) {
		if cmd == nil {
			return
		}
		pending = append(pending, cmd)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		_, cmd := m.Update(keys[i%len(keys)])
		_ = m.View()
		press = append(press, time.Since(t0))
		b.StopTimer()
		run(cmd)
		for len(pending) > 0 {
			c := pending[0]
			pending = pending[1:]
			msg := runWithTimeout(c)
			if batch, ok := msg.(tea.BatchMsg); ok {
				pending = append(pending, batch...)
				continue
			}
			if msg == nil || isTimer(msg) {
				continue
			}
			t1 := time.Now()
			_, next := m.Update(msg)
			_ = m.View()
			msgs = append(msgs, time.Since(t1))
			run(next)
		}
		b.StartTimer()
	}
	b.StopTimer()
	press.report(b, "key")
	msgs.report(b, "msg")
}

func runWithTimeout(c tea.Cmd) tea.Msg {
	done := make(chan tea.Msg, 1)
	go func() { done <- c() }()
	select {
	case m := <-done:
		return m
	case <-time.After(200 * time.Millisecond):
		return nil // a timer (tick, blink): not this keypress's work
	}
}

func isTimer(msg tea.Msg) bool {
	name := strings.ToLower(fmt.Sprintf("%T", msg))
	return strings.Contains(name, "tick") || strings.Contains(name, "blink")
}

func keys(ss ...string) []tea.Msg {
	out := make([]tea.Msg, len(ss))
	for i, s := range ss {
		out[i] = key(s)
	}
	return out
}

func BenchmarkKeypressToFrame(b *testing.B) {
	bundle := benchBundle(b)
	scroll := keys("j", "j", "j", "k", "j", "j", "G", "k", "g", "j")
	cases := []struct {
		name  string
		setup []tea.Msg
		keys  []tea.Msg
	}{
		{"Records100k", keys("1"), scroll},
		{"Keys100k", keys("2"), scroll},
		{"Executions", keys("3"), scroll},
		{"Audit1M", keys("4"), scroll},
		{"Timeline1M", keys("5"), scroll},
		{"KeyDetail", append(keys("2"), key("enter")), keys("j", "j", "l", "j", "h", "k")},
		{"RecordDetail60KBx200revs", []tea.Msg{uictx.JumpMsg{Kind: uictx.JumpRecord, Module: "NOTE", ID: "01JBXG00000000000000000000"}},
			keys("k", "k", "j", "2", "k", "l", "j", "j", "h", "1", "k", " ", "k")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m := tui.New(bundle.Ctx, bundle.Backend)
			m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
			tuitest.Settle(b, tuitest.Updater(m), m.Init())
			for _, k := range c.setup {
				tuitest.Settle(b, tuitest.Updater(m), cmdOf(m.Update(k)))
			}
			drive(b, m, c.keys)
		})
	}
}

// BenchmarkFrame draws one frame of an open record, snapshot and diff, at payload sizes: the
// bytes per frame (B/op) must not grow with the payload.
func BenchmarkFrame(b *testing.B) {
	bundle := benchBundle(b)
	for _, mode := range []string{"1", "2"} {
		for _, rec := range []struct{ name, id string }{{"payload1KB", "01JBENCH000000000000000001"}, {"payload60KB", "01JBXG00000000000000000000"}} {
			b.Run(fmt.Sprintf("mode%s/%s", mode, rec.name), func(b *testing.B) {
				m := tui.New(bundle.Ctx, bundle.Backend)
				m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
				tuitest.Settle(b, tuitest.Updater(m), cmdOf(m.Update(uictx.JumpMsg{Kind: uictx.JumpRecord, Module: "NOTE", ID: rec.id})))
				tuitest.Settle(b, tuitest.Updater(m), cmdOf(m.Update(key(mode))))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_ = m.View()
				}
			})
		}
	}
}

// firstOutput is an io.Writer that notes when want first appears in what was written.
type firstOutput struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	at   chan time.Time
	seen bool
}

func (f *firstOutput) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	if !f.seen && strings.Contains(f.buf.String(), f.want) {
		f.seen = true
		f.at <- time.Now()
	}
	return len(p), nil
}

// BenchmarkColdFirstFrame times a program's start until its output says what it prepares,
// with the database still opening (it never finishes here): the first frame must not wait.
func BenchmarkColdFirstFrame(b *testing.B) {
	styles := uictx.NewStyles(uictx.DefaultTheme())
	var l latencies
	for i := 0; i < b.N; i++ {
		out := &firstOutput{want: "creating the database cluster", at: make(chan time.Time, 1)}
		never := make(chan tui.BootResult)
		boot := tui.NewBoot(styles, "creating the database cluster in /tmp/x (first run: initdb takes a few seconds)…", never)
		start := time.Now()
		p := tea.NewProgram(boot, tea.WithInput(nil), tea.WithOutput(out), tea.WithoutSignals())
		done := make(chan struct{})
		go func() { _, _ = p.Run(); close(done) }()
		select {
		case at := <-out.at:
			l = append(l, at.Sub(start))
		case <-time.After(5 * time.Second):
			b.Fatalf("no first frame within 5 s: %q", out.buf.String())
		}
		p.Quit()
		<-done
	}
	l.report(b, "first-frame")
}
