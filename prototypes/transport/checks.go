package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
)

// A check is one of the seed's semantic checks, run on a fresh session of
// its own (crash_mid_call starts a second one).
type check struct {
	name string
	run  func(ctx context.Context, t *transport, s session) error
}

var checks = []check{
	{"handshake", checkHandshake},
	{"version_mismatch", checkVersionMismatch},
	{"sequential_echo", func(ctx context.Context, _ *transport, s session) error { return echoes(ctx, s, 0, 2000) }},
	{"concurrent_echo", checkConcurrentEcho},
	{"structured_errors", checkStructuredErrors},
	{"nested_callbacks", checkNestedCallbacks},
	{"chunked_upload", checkChunkedUpload},
	{"extension_push", checkPush},
	{"cancellation_reaches_handler", checkCancellation},
	{"stray_stdout", checkStrayStdout},
	{"crash_mid_call", checkCrash},
}

// runChecks runs every check against t and returns the failures by name.
func runChecks(ctx context.Context, t *transport) map[string]string {
	failed := map[string]string{}
	for _, c := range checks {
		err := func() error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			s, err := t.start(ctx, t.binary, []int{workload.Version})
			if err != nil {
				return fmt.Errorf("start: %w", err)
			}
			defer s.close()
			return c.run(ctx, t, s)
		}()
		if err != nil {
			failed[c.name] = err.Error()
		}
	}
	return failed
}

func checkHandshake(ctx context.Context, _ *transport, s session) error {
	// start agreed on the version; a call proves the session serves.
	return echoes(ctx, s, 0, 1)
}

func checkVersionMismatch(ctx context.Context, t *transport, s session) error {
	var first string
	for attempt := range 2 {
		_, err := t.start(ctx, t.binary, []int{workload.BadVersion})
		if err == nil {
			return errors.New("a host offering only a foreign version was accepted")
		}
		if attempt == 0 {
			first = err.Error()
		} else if err.Error() != first {
			return fmt.Errorf("refusal is not deterministic: %q, then %q", first, err.Error())
		}
	}
	return echoes(ctx, s, 0, 1)
}

func echoOnce(ctx context.Context, s session, g, seq int) error {
	in := workload.EchoParams{Seq: g*100000 + seq, Text: workload.EchoText}
	var out workload.EchoParams
	if err := s.call(ctx, workload.MethodEcho, in, &out); err != nil {
		return fmt.Errorf("echo %d/%d: %w", g, seq, err)
	}
	if out != in {
		return fmt.Errorf("echo %d/%d answered with %+v", g, seq, out)
	}
	return nil
}

func echoes(ctx context.Context, s session, g, n int) error {
	for i := range n {
		if err := echoOnce(ctx, s, g, i); err != nil {
			return err
		}
	}
	return nil
}

func checkConcurrentEcho(ctx context.Context, _ *transport, s session) error {
	errs := make([]error, 32)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() { errs[g] = echoes(ctx, s, g, 50) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func checkStructuredErrors(ctx context.Context, _ *transport, s session) error {
	var errs []error
	for _, want := range []workload.Authored{
		{Code: "conflict", Message: "revision 7 is stale; re-read and retry"},
		{Code: "not_found", Message: `no record named "alpha"`},
		{Code: "resource_exhausted", Message: "disk full: free 2 GiB under /var/cache"},
	} {
		err := s.call(ctx, workload.MethodFail, workload.FailParams{Code: want.Code, Message: want.Message}, nil)
		var got *workload.Authored
		if !errors.As(err, &got) || *got != want {
			errs = append(errs, fmt.Errorf("fail %s: got %v, want %v", want.Code, err, &want))
		}
	}
	const secret = "detail that stays in the extension's log"
	err := s.call(ctx, workload.MethodFail, workload.FailParams{Unauthored: secret}, nil)
	if !errors.Is(err, workload.ErrInternal) || strings.Contains(fmt.Sprint(err), secret) {
		errs = append(errs, fmt.Errorf("unauthored failure: got %v, want internal with no detail", err))
	}
	err = s.call(ctx, "bench_no_such_method", nil, nil)
	if !errors.Is(err, workload.ErrUnknownMethod) {
		errs = append(errs, fmt.Errorf("unknown method: got %v, want %v", err, workload.ErrUnknownMethod))
	}
	return errors.Join(errs...)
}

func checkNestedCallbacks(ctx context.Context, _ *transport, s session) error {
	const n = 1000
	before := s.hostCallbacks()
	var res workload.CallbackResult
	if err := s.call(ctx, workload.MethodCallback, workload.CallbackParams{N: n}, &res); err != nil {
		return err
	}
	if res.Count != n {
		return fmt.Errorf("%d callbacks reported, want %d", res.Count, n)
	}
	if before >= 0 {
		if got := s.hostCallbacks() - before; got != n {
			return fmt.Errorf("the host served %d callbacks, want %d", got, n)
		}
	}
	return nil
}

func checkChunkedUpload(ctx context.Context, _ *transport, s session) error {
	const total, chunk = 16 << 20, 64 << 10
	got, err := s.upload(ctx, total, chunk, 1)
	if err != nil {
		return err
	}
	_, digest := workload.Data(total, 1)
	want := workload.CommitResult{Bytes: total, SHA256: digest}
	if got.Bytes != want.Bytes || got.SHA256 != want.SHA256 {
		return fmt.Errorf("the receiver committed %d bytes %s, want %d bytes %s", got.Bytes, got.SHA256, want.Bytes, want.SHA256)
	}
	return nil
}

func checkPush(ctx context.Context, _ *transport, s session) error {
	var res workload.PushResult
	if err := s.call(ctx, workload.MethodPush, workload.PushParams{Value: "push-1"}, &res); err != nil {
		return err
	}
	if res.HostAnswer != "push-1 received" {
		return fmt.Errorf("relayed %q, want the host's answer", res.HostAnswer)
	}
	pushes, err := s.pushed(ctx)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(pushes, []string{"push-1"}) {
		return fmt.Errorf("the host holds pushes %q, want [push-1]", pushes)
	}
	return nil
}

// startBlock starts bench.block under callCtx and returns once its handler
// runs.
func startBlock(ctx, callCtx context.Context, s session, token string) (<-chan error, error) {
	done := make(chan error, 1)
	go func() { done <- s.call(callCtx, workload.MethodBlock, workload.TokenParams{Token: token}, nil) }()
	if err := s.call(ctx, workload.MethodBlockStart, workload.TokenParams{Token: token}, nil); err != nil {
		return nil, fmt.Errorf("waiting for the block to start: %w", err)
	}
	return done, nil
}

// cancelOnce cancels a running block and returns when the extension saw it.
func cancelOnce(ctx context.Context, s session, token string) (time.Duration, error) {
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, err := startBlock(ctx, callCtx, s, token)
	if err != nil {
		return 0, err
	}
	at := time.Now()
	cancel()
	select {
	case err = <-done:
	case <-ctx.Done():
		return 0, errors.New("the cancelled call did not return")
	}
	if !errors.Is(err, context.Canceled) {
		return 0, fmt.Errorf("the cancelled call returned %v, want %v", err, context.Canceled)
	}
	var seen workload.SeenResult
	if err := s.call(ctx, workload.MethodCancelSeen, workload.TokenParams{Token: token}, &seen); err != nil {
		return 0, err
	}
	if !seen.Seen {
		return 0, errors.New("the handler never saw its cancellation")
	}
	if err := s.call(ctx, workload.MethodRelease, workload.TokenParams{Token: token}, nil); err != nil {
		return 0, err
	}
	return time.Duration(seen.SeenAt - at.UnixNano()), nil
}

func checkCancellation(ctx context.Context, _ *transport, s session) error {
	if _, err := cancelOnce(ctx, s, "cancel-1"); err != nil {
		return err
	}
	return echoes(ctx, s, 0, 10)
}

func checkStrayStdout(ctx context.Context, _ *transport, s session) error {
	for i := range 3 {
		if err := s.call(ctx, workload.MethodStdout, nil, nil); err != nil {
			return err
		}
		if err := echoOnce(ctx, s, 0, i); err != nil {
			return fmt.Errorf("after stray output: %w", err)
		}
	}
	return nil
}

// crashOnce crashes the extension mid-call and returns how long the host
// took to see it, with the pending call's and later calls' outcomes.
func crashOnce(ctx context.Context, s session) (time.Duration, error) {
	pending, err := startBlock(ctx, ctx, s, "crash-1")
	if err != nil {
		return 0, err
	}
	at := time.Now()
	err = s.call(ctx, workload.MethodCrash, nil, nil)
	took := time.Since(at)
	if !errors.Is(err, workload.ErrBroken) {
		return 0, fmt.Errorf("the call that crashed the extension returned %v, want a transport error", err)
	}
	if err := <-pending; !errors.Is(err, workload.ErrBroken) {
		return 0, fmt.Errorf("a call pending at the crash returned %v, want a transport error", err)
	}
	return took, nil
}

func checkCrash(ctx context.Context, t *transport, s session) error {
	if _, err := crashOnce(ctx, s); err != nil {
		return err
	}
	if t.restarts {
		// The host's supervisor restarts the process by itself: the same
		// session serves again.
		return echoes(ctx, s, 0, 10)
	}
	for i := range 3 {
		if err := echoOnce(ctx, s, 0, i); !errors.Is(err, workload.ErrBroken) {
			return fmt.Errorf("a call after the crash returned %v, want a transport error", err)
		}
	}
	restarted, err := t.start(ctx, t.binary, []int{workload.Version})
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer restarted.close()
	return echoes(ctx, restarted, 0, 10)
}
