package sdk_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

//go:embed testdata/demo.json
var demoManifest []byte

// note is the current (v3) payload of demo.note: v1 was {"text"}, v2
// renamed text to body, v3 added tags.
type note struct {
	Body string   `json:"body"`
	Tags []string `json:"tags"`
}

// demo records what its handlers saw, for the tests to check.
type demo struct {
	mu      sync.Mutex
	log     []string
	effects map[string]int // the external system Once guards: intent → times made
	matched []json.RawMessage
}

func (d *demo) record(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

func (d *demo) records() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.log...)
}

// addInput steers demo.add.
type addInput struct {
	Text  string `json:"text"`
	Print bool   `json:"print,omitempty"` // write to stdout, as stray code would
}

// extension is the demo extension: one handler of each surface the SDK
// serves, small enough to read.
func (d *demo) extension() *sdk.Extension {
	d.effects = map[string]int{}
	return &sdk.Extension{
		Manifest: demoManifest,
		Initialize: func(ctx context.Context, p protocol.InitializeParams) error {
			d.record("initialize %s", p.StateDir)
			return nil
		},
		Migrate: func(ctx context.Context, host *sdk.Host, stored, declared int) error {
			d.record("migrate %d→%d", stored, declared)
			// Idempotent: every step checks what it finds.
			_, err := host.Update(ctx, func(t *sdk.Txn) error {
				var layout int
				if _, err := t.GetJSON("demo", "layout", &layout); err != nil || layout >= declared {
					return err
				}
				return t.Put("demo", "layout", declared)
			})
			return err
		},
		Configure: func(ctx context.Context, host *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
			d.record("configure %d entries", len(p.Entries))
			var r protocol.ConfigureResult
			for _, e := range p.Entries {
				r.Sources = append(r.Sources, protocol.SourceDecl{Name: "demo/" + e.ID, ScopeID: e.ScopeID, Families: []string{"demo.note"}, Reconcile: true})
			}
			return r, nil
		},
		Upcasters: map[string]sdk.Upcaster{
			"demo.note.v1": func(p json.RawMessage) (json.RawMessage, error) {
				var v1 struct{ Text string }
				if err := json.Unmarshal(p, &v1); err != nil {
					return nil, err
				}
				return json.Marshal(map[string]string{"body": v1.Text})
			},
			"demo.note.v2": func(p json.RawMessage) (json.RawMessage, error) {
				var n note
				if err := json.Unmarshal(p, &n); err != nil {
					return nil, err
				}
				n.Tags = []string{}
				return json.Marshal(n)
			},
		},
		Routes: map[string]sdk.Route{"demo": {
			Match: func(ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
				d.mu.Lock()
				d.matched = append(d.matched, p.Event.Payload)
				d.mu.Unlock()
				var n note
				if err := json.Unmarshal(p.Event.Payload, &n); err != nil {
					return protocol.RouteMatchResult{}, protocol.Errorf(protocol.CodeInvalid, "payload: %v", err)
				}
				return protocol.RouteMatchResult{Match: n.Body != "", Kind: "demo-review", Reason: "saw " + p.Event.Schema,
					Display: &protocol.Display{Title: n.Body}}, nil
			},
			Samples: func(ctx context.Context, p protocol.RouteSamplesParams) (protocol.RouteSamplesResult, error) {
				return protocol.RouteSamplesResult{Samples: []protocol.RouteSample{{ID: "hello", Title: "A note saying hello",
					Event: protocol.EventDraft{Source: "demo", DeliveryID: "sample", Family: "demo.note", Schema: "demo.note.v3",
						Payload: json.RawMessage(`{"body":"hello","tags":[]}`), OccurredAt: p.Now}}}}, nil
			},
		}},
		Ingress: map[string]sdk.Ingress{"demo": {
			Push: func(ctx context.Context, host *sdk.Host, p protocol.IngressPushParams) (protocol.IngressPushResult, error) {
				payload, _ := json.Marshal(note{Body: string(p.Delivery.Body), Tags: []string{}})
				return protocol.IngressPushResult{Events: []protocol.EventDraft{{Source: p.Source, DeliveryID: p.Delivery.ID,
					Family: "demo.note", Schema: "demo.note.v3", Payload: payload}}}, nil
			},
		}},
		Operations: map[string]sdk.Operation{
			"demo.add": {Handler: func(ctx context.Context, host *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				var in addInput
				if err := json.Unmarshal(call.Input, &in); err != nil {
					return protocol.OperationCallResult{}, protocol.Errorf(protocol.CodeInvalid, "input: %v", err)
				}
				if in.Print {
					fmt.Println("stray output from a handler")
				}
				out, err := sdk.Once(ctx, host, call.RequestID, func(ctx context.Context, intent sdk.Intent) (json.RawMessage, error) {
					d.mu.Lock()
					defer d.mu.Unlock()
					// Look for the intent first when an earlier attempt may
					// have made the effect.
					if intent.Resumed && d.effects[intent.Key] > 0 {
						return json.Marshal(map[string]string{"note": intent.Key})
					}
					d.effects[intent.Key]++
					return json.Marshal(map[string]string{"note": intent.Key})
				})
				return protocol.OperationCallResult{Output: out}, err
			}},
			"demo.await": {
				Wait: func(ctx context.Context, host *sdk.Host, call protocol.OperationWaitParams) (protocol.OperationWaitResult, error) {
					return protocol.OperationWaitResult{Wait: protocol.WaitPlan{Keys: []string{"demo:1"}, Description: "note 1 to change"}}, nil
				},
				DependencyFilter: func(ctx context.Context, p protocol.DependencyFilterParams) (protocol.DependencyFilterResult, error) {
					var n note
					err := json.Unmarshal(p.Event.Payload, &n)
					return protocol.DependencyFilterResult{Match: strings.Contains(n.Body, "wake")}, err
				},
			},
			"demo.post": {
				Emit: func(ctx context.Context, host *sdk.Host, call protocol.OperationEmitParams) (protocol.OperationEmitResult, error) {
					return protocol.OperationEmitResult{Event: protocol.EventDraft{Source: "demo", DeliveryID: call.RequestID,
						Family: "demo.note", Schema: "demo.note.v3", Payload: call.Input}, Commit: json.RawMessage(`{"index":"posted"}`)}, nil
				},
				Commit: func(ctx context.Context, p protocol.EmitCommitParams) (protocol.EmitCommitResult, error) {
					return protocol.EmitCommitResult{Puts: []protocol.KVPut{{Namespace: "demo.index", Key: p.Event.ID, Value: p.Commit}}}, nil
				},
			},
		},
		Recurrences: map[string]sdk.PureFunc[protocol.RecurrenceNextParams, protocol.RecurrenceNextResult]{
			"demo-digest": func(ctx context.Context, p protocol.RecurrenceNextParams) (protocol.RecurrenceNextResult, error) {
				return protocol.RecurrenceNextResult{Next: p.Now.Add(time.Hour)}, nil
			},
		},
		Triggers: map[string]sdk.PureFunc[protocol.WorkKindTriggerParams, protocol.WorkKindTriggerResult]{
			"demo-review": func(ctx context.Context, p protocol.WorkKindTriggerParams) (protocol.WorkKindTriggerResult, error) {
				return protocol.WorkKindTriggerResult{Trigger: p.Inputs[len(p.Inputs)-1].ID}, nil
			},
		},
		Executors: map[string]sdk.Executor{"demo-run": {
			Run: func(ctx context.Context, host *sdk.Host, p protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
				return protocol.ExecutorRunResult{Recovery: json.RawMessage(`{"pid":1}`)}, nil
			},
			Wait: func(ctx context.Context, host *sdk.Host, p protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
				return protocol.ExecutorWaitResult{State: "succeeded"}, nil
			},
			Recover: func(ctx context.Context, host *sdk.Host, p protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
				return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "run %s is gone", p.RunID)
			},
			Interrupt: func(ctx context.Context, host *sdk.Host, p protocol.ExecutorInterruptParams) (protocol.ExecutorInterruptResult, error) {
				return protocol.ExecutorInterruptResult{}, nil
			},
			Stop: func(ctx context.Context, host *sdk.Host, p protocol.ExecutorStopParams) (protocol.ExecutorStopResult, error) {
				return protocol.ExecutorStopResult{Stopped: true, Evidence: "process group reaped"}, nil
			},
		}},
		Tasks: map[string]sdk.Func[protocol.TaskRunParams, protocol.TaskRunResult]{
			"demo-sweep": func(ctx context.Context, host *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
				return protocol.TaskRunResult{Detail: "swept"}, nil
			},
		},
		Checks: map[string]sdk.Func[protocol.CheckRunParams, protocol.CheckRunResult]{
			"demo": func(ctx context.Context, host *sdk.Host, p protocol.CheckRunParams) (protocol.CheckRunResult, error) {
				if p.Deep {
					return protocol.CheckRunResult{}, errors.New("deep check reached /secret/path")
				}
				return protocol.CheckRunResult{OK: true, Detail: "fine"}, nil
			},
		},
		Shutdown: func(ctx context.Context, host *sdk.Host) error {
			d.record("shutdown")
			return nil
		},
		Logf: func(format string, args ...any) { d.record("log: "+format, args...) },
	}
}

// children are the programs the test binary runs as when re-executed
// with sdkChildEnv set.
var children = map[string]func(){
	// demo serves the demo extension on stdio, as a real extension does.
	"demo": func() {
		d := &demo{}
		ext := d.extension()
		ext.Logf = nil // diagnostics go to stderr
		if err := sdk.Serve(ext); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	},
}

const sdkChildEnv = "SDK_TEST_CHILD"
