package hosttest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/hosttest"
)

func TestClockFiresOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := hosttest.NewClock(start)
	ch := c.After(time.Second)
	require.NoError(t, c.WaitForRequests(context.Background(), 1))
	c.Advance(999 * time.Millisecond)
	select {
	case <-ch:
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Millisecond)
	assert.Equal(t, start.Add(time.Second), <-ch)
	assert.Equal(t, []time.Duration{time.Second}, c.Requested())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.WaitForRequests(ctx, 2), context.Canceled)
}
