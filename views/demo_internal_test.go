package views

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNextReadsDueAndCountsDown(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		-7 * time.Minute: "due", 0: "due", 500 * time.Millisecond: "in 0.5 s", 4 * time.Second: "in 4 s",
		4200 * time.Millisecond: "in 4 s", 30 * time.Second: "in 30 s", 125 * time.Second: "in 2m 5s", 3 * time.Hour: "in 3h00m",
	} {
		require.Equal(t, want, dueIn(now, now.Add(d)), "%s", d)
	}
}
