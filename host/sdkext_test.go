package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// adaptProvides declares every surface the adapter tests drive.
func adaptProvides(name string) map[string]any {
	return map[string]any{
		"extensions": []any{map[string]any{"type": name, "ingress": true,
			"families": []any{map[string]any{"name": name + ".note", "rederivable": true}}}},
		"routes":      []any{map[string]any{"handler": name}},
		"work_kinds":  []any{map[string]any{"name": name, "trigger": true}},
		"recurrences": []any{map[string]any{"name": name + "-tick"}},
		"operations": []any{
			map[string]any{"name": name + ".wait", "kind": "wait", "dependency_filter": true},
			map[string]any{"name": name + ".do", "kind": "handler"},
			map[string]any{"name": name + ".emit", "kind": "emit", "commit": true},
		},
		"tasks":   []any{map[string]any{"name": name + "-pass", "interval": "1m"}},
		"checks":  []any{map[string]any{"name": name}},
		"schemas": []any{map[string]any{"base": name + ".note", "versions": []int{1}}},
	}
}

var errAsked = errors.New("asked to fail")

// adaptExtension is a well-behaved Go extension written with the SDK. The
// same value runs in process (sdk.Attach) and as a process (sdk.Serve).
func adaptExtension(manifest []byte) *sdk.Extension {
	m, err := protocol.ParseManifest(manifest)
	if err != nil {
		panic(err)
	}
	name := m.Name
	return &sdk.Extension{
		Manifest: manifest,
		Configure: func(ctx context.Context, h *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
			return protocol.ConfigureResult{}, nil
		},
		Ingress: map[string]sdk.Ingress{name: {Push: func(ctx context.Context, h *sdk.Host, p protocol.IngressPushParams) (protocol.IngressPushResult, error) {
			// The body is the family to claim, so a test can make it lie.
			// Its "works" header is the Work the Event names.
			return protocol.IngressPushResult{Events: []protocol.EventDraft{{Source: p.Source, DeliveryID: p.Delivery.ID,
				Family: string(p.Delivery.Body), Schema: name + ".note.v1", Payload: json.RawMessage(`{}`),
				Works: p.Delivery.Headers["works"]}}}, nil
		}}},
		Routes: map[string]sdk.Route{name: {Match: func(ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
			if p.Event.Type != "match" {
				return protocol.RouteMatchResult{Reason: "not a match"}, nil
			}
			return protocol.RouteMatchResult{Match: true, CorrelationKeys: []string{"k:" + p.Event.DeliveryID},
				Display: &protocol.Display{Title: "matched"}}, nil
		}}},
		Recurrences: map[string]sdk.PureFunc[protocol.RecurrenceNextParams, protocol.RecurrenceNextResult]{
			name + "-tick": func(ctx context.Context, p protocol.RecurrenceNextParams) (protocol.RecurrenceNextResult, error) {
				return protocol.RecurrenceNextResult{Next: p.Timer.Due.Add(time.Hour)}, nil
			}},
		Triggers: map[string]sdk.PureFunc[protocol.WorkKindTriggerParams, protocol.WorkKindTriggerResult]{
			name: func(ctx context.Context, p protocol.WorkKindTriggerParams) (protocol.WorkKindTriggerResult, error) {
				if slices.ContainsFunc(p.Inputs, func(e protocol.Event) bool { return e.Type == "fail" }) {
					return protocol.WorkKindTriggerResult{}, errAsked
				}
				return protocol.WorkKindTriggerResult{Trigger: p.Inputs[len(p.Inputs)-1].ID}, nil
			}},
		Operations: map[string]sdk.Operation{name + ".do": {
			Handler: func(ctx context.Context, h *sdk.Host, p protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				return protocol.OperationCallResult{Output: json.RawMessage(`{"request":"` + p.RequestID + `","scope":"` + p.Authority.ScopeID + `"}`)}, nil
			},
		}, name + ".emit": {
			Emit: func(ctx context.Context, h *sdk.Host, p protocol.OperationEmitParams) (protocol.OperationEmitResult, error) {
				return protocol.OperationEmitResult{Event: protocol.EventDraft{Source: name + "/ops", DeliveryID: p.RequestID,
					Family: name + ".note", Schema: name + ".note.v1", Payload: p.Input}, Commit: json.RawMessage(`"note"`)}, nil
			},
			Commit: func(ctx context.Context, p protocol.EmitCommitParams) (protocol.EmitCommitResult, error) {
				return protocol.EmitCommitResult{Puts: []protocol.KVPut{{Namespace: name, Key: "by-event/" + p.Event.ID,
					Value: json.RawMessage(`{"seq":` + fmt.Sprint(p.Event.Sequence) + `}`)}}}, nil
			},
		}, name + ".wait": {
			Wait: func(ctx context.Context, h *sdk.Host, p protocol.OperationWaitParams) (protocol.OperationWaitResult, error) {
				return protocol.OperationWaitResult{}, nil
			},
			DependencyFilter: func(ctx context.Context, p protocol.DependencyFilterParams) (protocol.DependencyFilterResult, error) {
				if p.Event.Type == "fail" {
					return protocol.DependencyFilterResult{}, errAsked
				}
				return protocol.DependencyFilterResult{Match: p.Event.Type == "wake"}, nil
			},
		}},
		Tasks: map[string]sdk.Func[protocol.TaskRunParams, protocol.TaskRunResult]{
			name + "-pass": func(ctx context.Context, h *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
				return protocol.TaskRunResult{Detail: "ran"}, nil
			}},
		Checks: map[string]sdk.Func[protocol.CheckRunParams, protocol.CheckRunResult]{
			name: func(ctx context.Context, h *sdk.Host, p protocol.CheckRunParams) (protocol.CheckRunResult, error) {
				if p.Deep {
					return protocol.CheckRunResult{Status: "bogus"}, nil
				}
				return protocol.CheckRunResult{OK: false, Detail: "not yet"}, nil
			}},
	}
}

// runnerProvides declares one executor with every control but resume.
func runnerProvides(name string) map[string]any {
	return map[string]any{
		"executors": []any{map[string]any{"name": name,
			"labels":   map[string]any{"interrupt": true, "inject": true},
			"controls": map[string]any{"stop": true, "forget": true, "attach": true, "live": true}}},
	}
}

// runnerExtension is an executor written with the SDK. It keeps its runs
// in memory, so a restarted process knows none of them until the host
// re-adopts them with executor.recover. What a run does is chosen by its
// Work's id: "w-persist" persists its recovery through the host,
// "w-result" returns it with executor.run, "w-refused" fails when the
// host refuses the persistence, anything else persists nothing.
func runnerExtension(manifest []byte) *sdk.Extension {
	m, err := protocol.ParseManifest(manifest)
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	runs := map[string]chan string{} // run id → its end state
	end := func(run, state string) {
		mu.Lock()
		defer mu.Unlock()
		if ch, ok := runs[run]; ok {
			select {
			case ch <- state:
			default:
			}
		}
	}
	known := func(run string) (chan string, error) {
		mu.Lock()
		defer mu.Unlock()
		ch, ok := runs[run]
		if !ok {
			return nil, protocol.Errorf(protocol.CodeNotFound, "no run %q", run)
		}
		return ch, nil
	}
	return &sdk.Extension{
		Manifest: manifest,
		Executors: map[string]sdk.Executor{m.Name: {
			Run: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
				mu.Lock()
				runs[p.RunID] = make(chan string, 1)
				mu.Unlock()
				recovery := json.RawMessage(`{"adoptable":true,"work":"` + p.Work.ID + `"}`)
				switch p.Work.ID {
				case "w-persist", "w-refused":
					if err := h.PersistRecovery(ctx, p.RunID, recovery); err != nil {
						return protocol.ExecutorRunResult{}, err
					}
				case "w-result":
					return protocol.ExecutorRunResult{Recovery: recovery}, nil
				}
				return protocol.ExecutorRunResult{}, nil
			},
			Wait: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
				ch, err := known(p.RunID)
				if err != nil {
					return protocol.ExecutorWaitResult{}, err
				}
				select {
				case state := <-ch:
					ch <- state
					return protocol.ExecutorWaitResult{State: state, Error: "ended " + state}, nil
				case <-ctx.Done():
					return protocol.ExecutorWaitResult{}, ctx.Err()
				}
			},
			Recover: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
				var r struct {
					Adoptable bool `json:"adoptable"`
				}
				json.Unmarshal(p.Recovery, &r)
				if !r.Adoptable {
					return protocol.ExecutorRecoverResult{}, protocol.ErrNotAdoptable
				}
				mu.Lock()
				runs[p.RunID] = make(chan string, 1)
				runs[p.RunID] <- "succeeded"
				mu.Unlock()
				return protocol.ExecutorRecoverResult{}, nil
			},
			Inject: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorInjectParams) (protocol.ExecutorInjectResult, error) {
				if _, err := known(p.RunID); err != nil {
					return protocol.ExecutorInjectResult{}, err
				}
				if p.Text == "crash" {
					os.Exit(3)
				}
				end(p.RunID, "succeeded")
				return protocol.ExecutorInjectResult{}, nil
			},
			Interrupt: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorInterruptParams) (protocol.ExecutorInterruptResult, error) {
				end(p.RunID, "stopped")
				return protocol.ExecutorInterruptResult{}, nil
			},
			Stop: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorStopParams) (protocol.ExecutorStopResult, error) {
				end(p.RunID, "stopped")
				return protocol.ExecutorStopResult{Stopped: true}, nil
			},
			Forget: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorForgetParams) (protocol.ExecutorForgetResult, error) {
				mu.Lock()
				delete(runs, p.RunID)
				mu.Unlock()
				return protocol.ExecutorForgetResult{}, nil
			},
			Attach: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorAttachParams) (protocol.ExecutorAttachResult, error) {
				return protocol.ExecutorAttachResult{Argv: []string{"attach", p.RunID}}, nil
			},
			Live: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorLiveParams) (protocol.ExecutorLiveResult, error) {
				return protocol.ExecutorLiveResult{Outputs: []protocol.LiveOutput{{Name: "out", Size: 3, Tail: []byte("abc")}}}, nil
			},
		}},
	}
}
