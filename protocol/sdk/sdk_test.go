package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(sdkChildEnv); name != "" {
		child, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown child %q\n", name)
			os.Exit(2)
		}
		child()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var initParams = protocol.InitializeParams{
	ProtocolVersions: []protocol.Version{1},
	Host:             protocol.HostInfo{Name: "open-conduit", Version: "0.1.0"},
	StateDir:         "/state/extensions/demo",
}

// testContext bounds a test's calls so a bug fails the test instead of
// hanging it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mode is how a test reaches the extension: over a pair of OS pipes
// through ServeConn, or in process through Attach.
type mode struct {
	name  string
	start func(t *testing.T, ext *sdk.Extension, host *sdktest.Host) (sdk.Caller, <-chan error)
}

var modes = []mode{
	{"wire", func(t *testing.T, ext *sdk.Extension, host *sdktest.Host) (sdk.Caller, <-chan error) {
		conn, done, err := sdktest.Pipe(context.Background(), ext, host)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn, done
	}},
	{"inprocess", func(t *testing.T, ext *sdk.Extension, host *sdktest.Host) (sdk.Caller, <-chan error) {
		c, err := sdk.Attach(ext, host)
		require.NoError(t, err)
		return c, nil
	}},
}

// start initializes and configures the demo with its KV layout current.
func start(t *testing.T, m mode) (*demo, *sdktest.Host, sdk.Caller, <-chan error) {
	d, host := &demo{}, sdktest.New()
	c, done := m.start(t, d.extension(), host)
	ctx := testContext(t)
	require.NoError(t, c.Call(ctx, "initialize", initParams, nil))
	require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 2, Declared: 2}}, nil))
	return d, host, c, done
}

func TestLifecycle(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			d, host := &demo{}, sdktest.New()
			c, done := m.start(t, d.extension(), host)

			err := c.Call(ctx, "configure", protocol.ConfigureParams{}, nil)
			assert.ErrorIs(t, err, protocol.ErrInvalid, "configure before initialize")

			refused := initParams
			refused.ProtocolVersions = []protocol.Version{2, 99}
			err = c.Call(ctx, "initialize", refused, nil)
			assert.ErrorIs(t, err, protocol.ErrUnsupportedProtocolVersion)

			var init protocol.InitializeResult
			require.NoError(t, c.Call(ctx, "initialize", initParams, &init))
			assert.Equal(t, protocol.Version1, init.ProtocolVersion)
			assert.JSONEq(t, string(demoManifest), string(init.Manifest))
			assert.ErrorIs(t, c.Call(ctx, "initialize", initParams, nil), protocol.ErrInvalid, "second initialize")

			var conf protocol.ConfigureResult
			require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{
				Entries: []protocol.ConfigEntry{{ScopeID: "team", ID: "inbox", Type: "demo"}},
				KV:      protocol.KVLayout{Stored: 2, Declared: 2},
			}, &conf))
			assert.Equal(t, []protocol.SourceDecl{{Name: "demo/inbox", ScopeID: "team", Families: []string{"demo.note"}, Reconcile: true}}, conf.Sources)

			require.NoError(t, c.Call(ctx, "shutdown", protocol.Empty{}, nil))
			if m.name == "wire" {
				// The extension exits on its own after shutdown.
				require.NoError(t, <-done)
				err = c.Call(ctx, "task.run", protocol.TaskRunParams{Task: "demo-sweep"}, nil)
				assert.ErrorIs(t, err, jsonrpc.ErrTransport)
			} else {
				err = c.Call(ctx, "task.run", protocol.TaskRunParams{Task: "demo-sweep"}, nil)
				assert.ErrorIs(t, err, protocol.ErrShuttingDown)
			}
			assert.Equal(t, []string{"initialize /state/extensions/demo", "configure 1 entries", "shutdown"}, d.records()[:3])
		})
	}
}

// TestShutdownRefusesNewRequests parks a request on a host call, sends
// shutdown, and checks that a new request is refused while the parked one
// still finishes before shutdown is answered.
func TestShutdownRefusesNewRequests(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			d, host := &demo{}, sdktest.New()
			parked, release := make(chan struct{}), make(chan struct{})
			host.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
				if method == "secret.resolve" {
					close(parked)
					<-release
					return protocol.SecretResolveResult{Values: map[string]string{}}, true, nil
				}
				return nil, false, nil
			}
			ext := d.extension()
			began := make(chan struct{})
			ext.Shutdown = func(ctx context.Context, host *sdk.Host) error { close(began); return nil }
			ext.Tasks["demo-sweep"] = func(ctx context.Context, host *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
				_, err := host.SecretResolve(ctx, protocol.SecretResolveParams{Connection: "c"})
				return protocol.TaskRunResult{Detail: "finished"}, err
			}
			c, done := m.start(t, ext, host)
			require.NoError(t, c.Call(ctx, "initialize", initParams, nil))

			taskDone := make(chan error, 1)
			var task protocol.TaskRunResult
			go func() { taskDone <- c.Call(ctx, "task.run", protocol.TaskRunParams{Task: "demo-sweep"}, &task) }()
			<-parked
			shutdownDone := make(chan error, 1)
			go func() { shutdownDone <- c.Call(ctx, "shutdown", protocol.Empty{}, nil) }()
			<-began

			err := c.Call(ctx, "check.run", protocol.CheckRunParams{Check: "demo"}, nil)
			assert.ErrorIs(t, err, protocol.ErrShuttingDown)
			select {
			case err := <-shutdownDone:
				t.Fatalf("shutdown answered (%v) while a request was in flight", err)
			default:
			}
			close(release)
			require.NoError(t, <-taskDone)
			assert.Equal(t, "finished", task.Detail)
			require.NoError(t, <-shutdownDone)
			if done != nil {
				require.NoError(t, <-done)
			}
		})
	}
}

// TestShutdownCancelsAfterGrace: a request that outlives the grace period
// is cancelled, and shutdown is still answered.
func TestShutdownCancelsAfterGrace(t *testing.T) {
	ctx := testContext(t)
	d, host := &demo{}, sdktest.New()
	ext := d.extension()
	ext.ShutdownGrace = time.Millisecond
	started := make(chan struct{})
	ext.Tasks["demo-sweep"] = func(ctx context.Context, host *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
		close(started)
		<-ctx.Done()
		return protocol.TaskRunResult{}, ctx.Err()
	}
	c, err := sdk.Attach(ext, host)
	require.NoError(t, err)
	require.NoError(t, c.Call(ctx, "initialize", initParams, nil))
	taskErr := make(chan error, 1)
	go func() { taskErr <- c.Call(ctx, "task.run", protocol.TaskRunParams{Task: "demo-sweep"}, nil) }()
	<-started
	require.NoError(t, c.Call(ctx, "shutdown", protocol.Empty{}, nil))
	err = <-taskErr
	require.Error(t, err)
	assert.Equal(t, protocol.CodeInternal, protocol.CodeOf(err), "a request cancelled by shutdown, not by its caller, is internal")
}

func TestExitOnEndOfInput(t *testing.T) {
	conn, done, err := sdktest.Pipe(context.Background(), (&demo{}).extension(), sdktest.New())
	require.NoError(t, err)
	require.NoError(t, conn.Call(testContext(t), "initialize", initParams, nil))
	conn.Close()
	require.NoError(t, <-done)
}

func TestServeConnRefusesAMismatchedExtension(t *testing.T) {
	ext := (&demo{}).extension()
	delete(ext.Routes, "demo")
	ext.Tasks["other"] = ext.Tasks["demo-sweep"]
	delete(ext.Upcasters, "demo.note.v1")
	r, w := io.Pipe()
	err := sdk.ServeConn(context.Background(), r, w, ext)
	require.Error(t, err)
	for _, want := range []string{
		`the manifest declares route handler "demo" but the Extension has no handler for it`,
		`task "other" has a handler but the manifest does not declare it`,
		`the manifest declares upcaster for schema "demo.note.v1"`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = sdk.Attach(ext, sdktest.New())
	assert.Error(t, err)
}

func TestMigrateRunsBeforeConfigure(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			d, host := &demo{}, sdktest.New()
			c, _ := m.start(t, d.extension(), host)
			require.NoError(t, c.Call(ctx, "initialize", initParams, nil))

			require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 0, Declared: 2}}, nil))
			assert.JSONEq(t, "2", string(host.KV("demo", "layout")))
			// A crash before the host recorded the layout: configure comes
			// again with the same versions, and the migration is a no-op.
			require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 0, Declared: 2}}, nil))
			// Current layout: nothing migrates.
			require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 2, Declared: 2}}, nil))
			err := c.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 3, Declared: 2}}, nil)
			assert.ErrorIs(t, err, protocol.ErrKVDowngrade)

			assert.Equal(t, []string{
				"initialize /state/extensions/demo",
				"migrate 0→2", "configure 0 entries",
				"migrate 0→2", "configure 0 entries",
				"configure 0 entries",
			}, d.records())
			assert.Equal(t, []string{"kv.get", "kv.commit", "kv.get"}, host.Calls(), "the second migration read and wrote nothing")
		})
	}
}

func event(schema, payload string) protocol.Event {
	return protocol.Event{ID: "evt_1", Sequence: 1, ScopeID: "team", Source: "demo/inbox", DeliveryID: "d-1",
		Family: "demo.note", Schema: schema, Payload: json.RawMessage(payload), Root: "evt_1"}
}

func TestUpcastersChain(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			d, _, c, _ := start(t, m)
			match := func(ev protocol.Event) protocol.RouteMatchResult {
				var r protocol.RouteMatchResult
				require.NoError(t, c.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: "demo", ScopeID: "team", Event: ev}, &r))
				return r
			}
			for _, tc := range []struct{ schema, payload string }{
				{"demo.note.v1", `{"text":"hi"}`},
				{"demo.note.v2", `{"body":"hi"}`},
				{"demo.note.v3", `{"body":"hi","tags":[]}`},
			} {
				r := match(event(tc.schema, tc.payload))
				assert.True(t, r.Match, tc.schema)
				assert.Equal(t, "saw demo.note.v3", r.Reason, tc.schema)
				assert.Equal(t, &protocol.Display{Title: "hi"}, r.Display, tc.schema)
			}
			d.mu.Lock()
			for _, p := range d.matched {
				assert.JSONEq(t, `{"body":"hi","tags":[]}`, string(p))
			}
			d.mu.Unlock()

			// Payloads this release cannot read never reach the handler and
			// get the same answer every time.
			for _, tc := range []struct{ schema, status string }{
				{"demo.note.v4", "newer"},
				{"demo.other.v1", "undeclared"},
				{"demo.note", "undeclared"},
			} {
				first := match(event(tc.schema, `{"body":"hi"}`))
				assert.False(t, first.Match, tc.schema)
				assert.Contains(t, first.Reason, tc.status, tc.schema)
				assert.Equal(t, first, match(event(tc.schema, `{"body":"hi"}`)), "deterministic")

				var f protocol.DependencyFilterResult
				require.NoError(t, c.Call(ctx, "dependency.filter", protocol.DependencyFilterParams{
					Operation: "demo.await", Event: event(tc.schema, `{"body":"wake"}`)}, &f))
				assert.False(t, f.Match, tc.schema)
			}
			d.mu.Lock()
			assert.Len(t, d.matched, 3, "no unreadable payload reached the handler")
			d.mu.Unlock()

			var f protocol.DependencyFilterResult
			require.NoError(t, c.Call(ctx, "dependency.filter", protocol.DependencyFilterParams{
				Operation: "demo.await", Event: event("demo.note.v1", `{"text":"wake up"}`)}, &f))
			assert.True(t, f.Match, "an upcast payload reaches the filter")

			var tr protocol.WorkKindTriggerResult
			newer, old := event("demo.note.v9", `{}`), event("demo.note.v1", `{"text":"x"}`)
			newer.ID, old.ID = "evt_newer", "evt_old"
			require.NoError(t, c.Call(ctx, "work_kind.trigger", protocol.WorkKindTriggerParams{Kind: "demo-review", Inputs: []protocol.Event{old, newer}}, &tr))
			assert.Equal(t, "evt_old", tr.Trigger, "the unreadable input is not offered")
			require.NoError(t, c.Call(ctx, "work_kind.trigger", protocol.WorkKindTriggerParams{Kind: "demo-review", Inputs: []protocol.Event{newer}}, &tr))
			assert.Equal(t, "evt_newer", tr.Trigger, "nothing readable: the first input")
		})
	}
}

// TestHostUpcast: a payload stored by an older release and read back
// through the state reads is upcast like a routed one.
func TestHostUpcast(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			d, host := &demo{}, sdktest.New()
			host.AddEvent(event("demo.note.v1", `{"text":"stored by release 1"}`))
			newer := event("demo.note.v4", `{}`)
			newer.ID = "evt_4"
			host.AddEvent(newer)
			var got, unreadable protocol.Event
			var gotOK, unreadableOK bool
			ext := d.extension()
			ext.Tasks["demo-sweep"] = func(ctx context.Context, h *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
				var err error
				if got, err = h.Event(ctx, "evt_1"); err != nil {
					return protocol.TaskRunResult{}, err
				}
				if gotOK, err = h.Upcast(&got); err != nil {
					return protocol.TaskRunResult{}, err
				}
				if unreadable, err = h.Event(ctx, "evt_4"); err != nil {
					return protocol.TaskRunResult{}, err
				}
				unreadableOK, err = h.Upcast(&unreadable)
				return protocol.TaskRunResult{}, err
			}
			c, _ := m.start(t, ext, host)
			require.NoError(t, c.Call(ctx, "initialize", initParams, nil))
			require.NoError(t, c.Call(ctx, "task.run", protocol.TaskRunParams{Task: "demo-sweep"}, nil))
			assert.True(t, gotOK)
			assert.Equal(t, "demo.note.v3", got.Schema)
			assert.JSONEq(t, `{"body":"stored by release 1","tags":[]}`, string(got.Payload))
			assert.False(t, unreadableOK)
		})
	}
}

func TestTxnReadsRepeatAndSeeOwnWrites(t *testing.T) {
	ctx := testContext(t)
	fake := sdktest.New()
	fake.SetKV("demo", "a", json.RawMessage(`1`))
	host := hostOver(t, "inprocess", fake)
	_, err := host.Update(ctx, func(tx *sdk.Txn) error {
		v, found, err := tx.Get("demo", "a")
		require.NoError(t, err)
		require.True(t, found)
		fake.SetKV("demo", "a", json.RawMessage(`2`)) // another writer, after the read
		again, _, err := tx.Get("demo", "a")
		require.NoError(t, err)
		assert.JSONEq(t, string(v), string(again), "a repeated read sees what the first saw")
		require.NoError(t, tx.Put("demo", "b", "new"))
		b, found, err := tx.Get("demo", "b")
		require.NoError(t, err)
		assert.True(t, found)
		assert.JSONEq(t, `"new"`, string(b))
		tx.Delete("demo", "b")
		_, found, err = tx.Get("demo", "b")
		require.NoError(t, err)
		assert.False(t, found)
		return errors.New("stop")
	})
	assert.EqualError(t, err, "stop")
	assert.Equal(t, []string{"kv.get"}, fake.Calls(), "one read reached the host; nothing was committed")
}

func TestRetiredPayload(t *testing.T) {
	manifest := strings.Replace(string(demoManifest), `"versions": [1, 2, 3]`, `"versions": [2, 3]`, 1)
	require.NotEqual(t, string(demoManifest), manifest)
	d := &demo{}
	ext := d.extension()
	ext.Manifest = []byte(manifest)
	delete(ext.Upcasters, "demo.note.v1")
	c, err := sdk.Attach(ext, sdktest.New())
	require.NoError(t, err)
	ctx := testContext(t)
	require.NoError(t, c.Call(ctx, "initialize", initParams, nil))
	var r protocol.RouteMatchResult
	require.NoError(t, c.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: "demo", Event: event("demo.note.v1", `{"text":"hi"}`)}, &r))
	assert.False(t, r.Match)
	assert.Contains(t, r.Reason, "retired")
	assert.Empty(t, d.matched)
}

// TestSurfaces calls one method of every surface the SDK serves, both
// ways, and checks the declared-name and kind rules.
func TestSurfaces(t *testing.T) {
	now := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			d, _, c, _ := start(t, m)

			var samples protocol.RouteSamplesResult
			require.NoError(t, c.Call(ctx, "route.samples", protocol.RouteSamplesParams{Handler: "demo", Now: now}, &samples))
			require.Len(t, samples.Samples, 1)
			assert.Equal(t, now, samples.Samples[0].Event.OccurredAt)

			var push protocol.IngressPushResult
			require.NoError(t, c.Call(ctx, "ingress.push", protocol.IngressPushParams{Type: "demo", Source: "demo/inbox",
				Delivery: protocol.Delivery{ID: "d-9", Body: []byte("from a webhook")}}, &push))
			require.Len(t, push.Events, 1)
			assert.JSONEq(t, `{"body":"from a webhook","tags":[]}`, string(push.Events[0].Payload))
			err := c.Call(ctx, "ingress.reconcile", protocol.IngressReconcileParams{Type: "demo", Source: "demo/inbox"}, nil)
			assert.ErrorIs(t, err, protocol.ErrUnsupported)

			var wait protocol.OperationWaitResult
			require.NoError(t, c.Call(ctx, "operation.wait", protocol.OperationWaitParams{Operation: "demo.await"}, &wait))
			assert.Equal(t, "note 1 to change", wait.Wait.Description)
			var emit protocol.OperationEmitResult
			require.NoError(t, c.Call(ctx, "operation.emit", protocol.OperationEmitParams{Operation: "demo.post", RequestID: "r-1", Input: json.RawMessage(`{"body":"x","tags":[]}`)}, &emit))
			var commit protocol.EmitCommitResult
			require.NoError(t, c.Call(ctx, "emit.commit", protocol.EmitCommitParams{Operation: "demo.post", Event: protocol.Event{ID: "evt_9"}, Commit: emit.Commit}, &commit))
			assert.Equal(t, []protocol.KVPut{{Namespace: "demo.index", Key: "evt_9", Value: json.RawMessage(`{"index":"posted"}`)}}, commit.Puts)
			err = c.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: "demo.post"}, nil)
			assert.ErrorIs(t, err, protocol.ErrUndeclared, "an emit operation is not called as a handler")

			var next protocol.RecurrenceNextResult
			require.NoError(t, c.Call(ctx, "recurrence.next", protocol.RecurrenceNextParams{Recurrence: "demo-digest", Now: now}, &next))
			assert.Equal(t, now.Add(time.Hour), next.Next)

			var run protocol.ExecutorRunResult
			require.NoError(t, c.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: "demo-run", RunID: "run-1"}, &run))
			assert.JSONEq(t, `{"pid":1}`, string(run.Recovery))
			err = c.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: "demo-run", RunID: "run-1"}, nil)
			assert.ErrorIs(t, err, protocol.ErrNotAdoptable)
			var stop protocol.ExecutorStopResult
			require.NoError(t, c.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: "demo-run", RunID: "run-1"}, &stop))
			assert.True(t, stop.Stopped)
			err = c.Call(ctx, "executor.forget", protocol.ExecutorForgetParams{Executor: "demo-run", RunID: "run-1"}, nil)
			assert.ErrorIs(t, err, protocol.ErrUndeclared, "a control the manifest does not declare")
			err = c.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: "other-run"}, nil)
			assert.ErrorIs(t, err, protocol.ErrUndeclared)

			var check protocol.CheckRunResult
			require.NoError(t, c.Call(ctx, "check.run", protocol.CheckRunParams{Check: "demo"}, &check))
			assert.Equal(t, protocol.CheckRunResult{OK: true, Detail: "fine"}, check)
			err = c.Call(ctx, "check.run", protocol.CheckRunParams{Check: "demo", Deep: true}, nil)
			require.Error(t, err)
			assert.Equal(t, protocol.CodeInternal, protocol.CodeOf(err))
			assert.NotContains(t, err.Error(), "/secret/path", "an unauthored error crosses without detail")
			assert.Contains(t, strings.Join(d.records(), "\n"), "deep check reached /secret/path", "the detail is logged")

			err = c.Call(ctx, "provider.acquire", json.RawMessage(`{}`), nil)
			assert.ErrorIs(t, err, protocol.ErrUndeclared, "a surface the manifest does not declare")
			err = c.Call(ctx, "kv.get", protocol.KVGetParams{}, nil)
			assert.ErrorIs(t, err, protocol.ErrMethodNotFound, "a host method")
		})
	}
}

// TestUpdateRetriesOnConflict: another writer changes a key between the
// transaction's read and its commit; the commit conflicts, and Update
// re-reads and tries again.
func TestUpdateRetriesOnConflict(t *testing.T) {
	for _, m := range []string{"wire", "inprocess"} {
		t.Run(m, func(t *testing.T) {
			ctx := testContext(t)
			fake := sdktest.New()
			fake.SetKV("demo", "counter", json.RawMessage(`1`))
			host := hostOver(t, m, fake)
			attempts := 0
			_, err := host.Update(ctx, func(tx *sdk.Txn) error {
				attempts++
				var n int
				if _, err := tx.GetJSON("demo", "counter", &n); err != nil {
					return err
				}
				if attempts == 1 {
					fake.SetKV("demo", "counter", json.RawMessage(`10`)) // another writer
				}
				return tx.Put("demo", "counter", n+1)
			})
			require.NoError(t, err)
			assert.Equal(t, 2, attempts)
			assert.JSONEq(t, `11`, string(fake.KV("demo", "counter")), "the increment applied to the other writer's value")

			attempts = 0
			_, err = host.Update(ctx, func(tx *sdk.Txn) error {
				attempts++
				if _, _, err := tx.Get("demo", "counter"); err != nil {
					return err
				}
				fake.SetKV("demo", "counter", json.RawMessage(fmt.Sprint(100+attempts)))
				return tx.Put("demo", "counter", 0)
			})
			assert.ErrorIs(t, err, protocol.ErrConflict)
			assert.Equal(t, sdk.MaxUpdateAttempts, attempts, "bounded retries")

			wantErr := errors.New("no")
			_, err = host.Update(ctx, func(tx *sdk.Txn) error { return wantErr })
			assert.ErrorIs(t, err, wantErr)
		})
	}
}

// hostOver returns a Host calling fake in process, or over a jsonrpc
// connection on OS pipes.
func hostOver(t *testing.T, m string, fake *sdktest.Host) *sdk.Host {
	manifest, err := protocol.ParseManifest(demoManifest)
	require.NoError(t, err)
	if m == "inprocess" {
		return sdk.NewHost(fake, manifest)
	}
	r1, w1, err := os.Pipe()
	require.NoError(t, err)
	r2, w2, err := os.Pipe()
	require.NoError(t, err)
	hostSide := jsonrpc.NewConn(r1, w2, fake.Handler(), &jsonrpc.Options{DecodeError: sdk.DecodeError})
	extSide := jsonrpc.NewConn(r2, w1, nil, &jsonrpc.Options{DecodeError: sdk.DecodeError})
	t.Cleanup(func() { extSide.Close(); hostSide.Close() })
	return sdk.NewHost(extSide, manifest)
}

func TestTxnEmit(t *testing.T) {
	ctx := testContext(t)
	fake := sdktest.New()
	host := hostOver(t, "wire", fake)
	var id string
	r, err := host.Update(ctx, func(tx *sdk.Txn) error {
		id = tx.Emit(protocol.Emission{Source: "demo/inbox", DeliveryID: "d-1", ScopeID: "team", Family: "demo.note", Schema: "demo.note.v3", Payload: json.RawMessage(`{"body":"x","tags":[]}`)})
		return tx.Put("demo", "by-event/"+id, "seen")
	})
	require.NoError(t, err)
	require.Len(t, r.Accepted, 1)
	assert.Equal(t, id, r.Accepted[0].Event.ID)
	assert.NotNil(t, fake.KV("demo", "by-event/"+id))

	_, err = host.Update(ctx, func(tx *sdk.Txn) error {
		tx.Emit(protocol.Emission{Source: "demo", DeliveryID: "d-2", Family: "demo.note", Schema: "demo.note.v1"})
		return nil
	})
	assert.ErrorIs(t, err, protocol.ErrUnreadableSchema, "an old schema is refused before it crosses")
}

func TestArtifactWriter(t *testing.T) {
	for _, m := range []string{"wire", "inprocess"} {
		t.Run(m, func(t *testing.T) {
			ctx := testContext(t)
			fake := sdktest.New()
			var mu sync.Mutex
			inflight, maxInflight := 0, 0
			fake.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
				if method == "artifact.write" {
					mu.Lock()
					inflight++
					maxInflight = max(maxInflight, inflight)
					mu.Unlock()
					defer func() { mu.Lock(); inflight--; mu.Unlock() }()
				}
				return nil, false, nil
			}
			host := hostOver(t, m, fake)
			w, err := host.CreateArtifact(ctx, protocol.ArtifactCreateParams{RunID: "run-1", Name: "log.txt", MediaType: "text/plain"})
			require.NoError(t, err)
			data := bytes.Repeat([]byte("0123456789abcdef"), (2*protocol.MaxChunkBytes+1000)/16)
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 100_003)
				written, err := w.Write(rest[:n])
				require.NoError(t, err)
				require.Equal(t, n, written)
				rest = rest[n:]
			}
			res, err := w.Commit()
			require.NoError(t, err)
			assert.Equal(t, int64(len(data)), res.Size)

			a := fake.Artifact(w.ID())
			require.NotNil(t, a)
			assert.True(t, a.Committed)
			require.Len(t, a.Chunks, 3)
			for _, c := range a.Chunks {
				assert.LessOrEqual(t, len(c), protocol.MaxChunkBytes)
			}
			assert.Equal(t, data, bytes.Join(a.Chunks, nil))
			assert.Equal(t, 1, maxInflight, "each chunk is acknowledged before the next")
			_, err = w.Write([]byte("late"))
			assert.Error(t, err, "a committed artifact takes no more writes")

			// A wrong acknowledgement stops the writer.
			fake.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
				if method == "artifact.write" {
					return protocol.ArtifactWriteResult{Size: 1}, true, nil
				}
				return nil, false, nil
			}
			w, err = host.CreateArtifact(ctx, protocol.ArtifactCreateParams{RunID: "run-1", Name: "bad"})
			require.NoError(t, err)
			_, err = w.Write([]byte("hello"))
			require.NoError(t, err, "buffered")
			assert.ErrorContains(t, w.Close(), "acknowledged 1 bytes, want 5")
			require.NoError(t, w.Abort())
		})
	}
}

// TestOnceAcrossRetriedRequestID drills the replay window: a call whose
// effect happened but whose result the host never committed is retried
// with the same request id, and the effect is made once.
func TestOnceAcrossRetriedRequestID(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			d, host, c, _ := start(t, m)
			call := func(requestID string) (json.RawMessage, error) {
				var r protocol.OperationCallResult
				err := c.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: "demo.add", RequestID: requestID,
					Input: json.RawMessage(`{"text":"hi"}`), Authority: protocol.Authority{ScopeID: "team"}}, &r)
				return r.Output, err
			}
			// The result is lost after the effect (the host crashed before
			// committing it); the retry replays the recorded result.
			first, err := call("req-1")
			require.NoError(t, err)
			again, err := call("req-1")
			require.NoError(t, err)
			assert.JSONEq(t, string(first), string(again))

			// The extension crashes between the effect and recording it
			// done: the retry resumes the intent and finds the effect.
			failOnce := true
			host.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
				p, _ := protocol.DecodeParams[protocol.KVCommitParams](params)
				if method == "kv.commit" && failOnce && len(p.Preconditions) == 0 {
					failOnce = false
					return nil, true, protocol.Errorf(protocol.CodeInternal, "connection lost")
				}
				return nil, false, nil
			}
			_, err = call("req-2")
			require.Error(t, err)
			_, err = call("req-2")
			require.NoError(t, err)

			_, err = call("req-3")
			require.NoError(t, err)

			d.mu.Lock()
			defer d.mu.Unlock()
			assert.Equal(t, map[string]int{"req-1": 1, "req-2": 1, "req-3": 1}, d.effects)
		})
	}
}

func TestIntentKey(t *testing.T) {
	a := sdk.IntentKey("req-1", "comment")
	assert.Equal(t, a, sdk.IntentKey("req-1", "comment"))
	assert.NotEqual(t, a, sdk.IntentKey("req-1", "issue"))
	assert.NotEqual(t, sdk.IntentKey("ab", "c"), sdk.IntentKey("a", "bc"))
	assert.Regexp(t, `^intent-[0-9a-f]{32}$`, a)
}

// TestStrayStdout runs the demo as a subprocess and has a handler print to
// stdout: the protocol stream stays intact and the text lands in stderr.
func TestStrayStdout(t *testing.T) {
	ctx := testContext(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sdkChildEnv+"=demo")
	p, err := sdktest.Start(cmd, sdktest.New())
	require.NoError(t, err)
	conn := p.Conn

	require.NoError(t, conn.Call(ctx, "initialize", initParams, nil))
	require.NoError(t, conn.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 2, Declared: 2}}, nil))
	for i, print := range []bool{true, false, true} {
		var r protocol.OperationCallResult
		input := fmt.Sprintf(`{"text":"n%d","print":%t}`, i, print)
		require.NoError(t, conn.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: "demo.add",
			RequestID: fmt.Sprint("req-", i), Input: json.RawMessage(input)}, &r), "call %d", i)
		assert.JSONEq(t, fmt.Sprintf(`{"note":"req-%d"}`, i), string(r.Output))
	}
	conn.Close() // end of input: the extension exits
	require.NoError(t, p.Err())
	assert.Equal(t, 2, strings.Count(p.Stderr(), "stray output from a handler\n"), "stderr:\n%s", p.Stderr())
}
