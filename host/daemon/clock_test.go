package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// The API's test backend serves the clock through a Daemon holding only
// what AdvanceClock uses, on a manual clock at passEpoch.
var testClocks sync.Map // *apiTestBackend → *Daemon

func (b *apiTestBackend) clockDaemon() *Daemon {
	d, _ := testClocks.LoadOrStore(b, &Daemon{opts: Options{Clock: NewManualClock(passEpoch)}, engine: b.engine,
		passes: newPassRunner(nil, slog.New(slog.DiscardHandler)), log: slog.New(slog.DiscardHandler)})
	return d.(*Daemon)
}

func (b *apiTestBackend) ClockState() client.ClockState { return b.clockDaemon().ClockState() }

func (b *apiTestBackend) AdvanceClock(ctx context.Context, req client.ClockAdvance) (client.ClockState, error) {
	return b.clockDaemon().AdvanceClock(ctx, req)
}

func TestClockAdvanceMovesTheManualClock(t *testing.T) {
	_, c := newAPITest(t)
	ctx := t.Context()
	st, err := c.Clock(ctx)
	require.NoError(t, err)
	assert.Equal(t, client.ClockState{Now: passEpoch, Manual: true}, st)
	st, err = c.AdvanceClock(ctx, 90*time.Second)
	require.NoError(t, err)
	assert.Equal(t, passEpoch.Add(90*time.Second), st.Now)
	st, err = c.SetClock(ctx, passEpoch.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, passEpoch.Add(time.Hour), st.Now)
	st, err = c.AdvanceClock(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, passEpoch.Add(time.Hour), st.Now, "a zero advance fires what is due now and moves nothing")

	_, err = c.SetClock(ctx, passEpoch)
	assert.ErrorIs(t, err, client.ErrInvalidRequest, "the clock never goes back")
	_, err = c.AdvanceClock(ctx, -time.Second)
	assert.ErrorIs(t, err, client.ErrInvalidRequest)
	st, err = c.Clock(ctx)
	require.NoError(t, err)
	assert.Equal(t, passEpoch.Add(time.Hour), st.Now, "a refused advance moves nothing")
}

// Each malformed body is refused invalid_request with a stable message
// and moves nothing.
func TestClockAdvanceRefusesBadBodies(t *testing.T) {
	_, c := newAPITest(t)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.Socket())
	}}}
	defer hc.CloseIdleConnections()
	for _, body := range []string{
		``, `{}`, `{"by":"soon"}`, `{"by":"-1s"}`, `{"by":"1s","to":"2027-01-01T00:00:00Z"}`,
		`{"to":"2020-01-01T00:00:00Z"}`, `{"by":"1s","by":"2s"}`, `{"by":"1s","extra":1}`, `[1]`,
	} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", "http://x/v1/clock/advance", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "body %s", body)
	}
	st, err := c.Clock(t.Context())
	require.NoError(t, err)
	assert.Equal(t, passEpoch, st.Now)
}

// A daemon on the system clock shows it and refuses to move it.
func TestClockAdvanceRefusedOnTheSystemClock(t *testing.T) {
	d := &Daemon{opts: Options{Clock: runtime.SystemClock{}}}
	assert.False(t, d.ClockState().Manual)
	_, err := d.AdvanceClock(t.Context(), client.ClockAdvance{By: "1s"})
	assert.ErrorIs(t, err, client.ErrConflict)
}

// The manual clock moves at once, then calls what fell due in due order,
// each seeing the new time; a stopped callback never runs; a callback
// registered on the way that is due by then runs in the same move.
func TestManualClockMovesThenFires(t *testing.T) {
	c := NewManualClock(passEpoch)
	var got []string
	c.AfterFunc(2*time.Minute, func() { got = append(got, "2m at "+c.Now().Sub(passEpoch).String()) })
	c.AfterFunc(time.Minute, func() {
		got = append(got, "1m at "+c.Now().Sub(passEpoch).String())
		c.AfterFunc(0, func() { got = append(got, "chained") })
	})
	stop := c.AfterFunc(time.Minute, func() { got = append(got, "stopped") })
	late := c.AfterFunc(time.Hour, func() { got = append(got, "late") })
	assert.True(t, stop())
	assert.False(t, stop(), "a second stop stops nothing")
	c.Advance(3 * time.Minute)
	assert.Equal(t, []string{"1m at 3m0s", "2m at 3m0s", "chained"}, got)
	c.Set(passEpoch)
	assert.Equal(t, passEpoch.Add(3*time.Minute), c.Now(), "never backwards")
	assert.True(t, late(), "the hour's timer still waits")
}
