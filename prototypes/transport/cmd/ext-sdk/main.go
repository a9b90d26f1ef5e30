// Command ext-sdk serves the workload as an SDK extension: each method is
// an operation, host callbacks are the real host service's methods
// (state.sequence, kv.commit, artifact.*).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
)

func main() {
	p := &workload.Peer{Crash: workload.CrashNow}
	ops := map[string]sdk.Operation{}
	op := func(name string, f func(ctx context.Context, h *sdk.Host, in json.RawMessage) (any, error)) {
		ops[name] = sdk.Operation{Handler: func(ctx context.Context, h *sdk.Host, c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
			res, err := f(ctx, h, c.Input)
			if err != nil {
				return protocol.OperationCallResult{}, protocolError(err)
			}
			out, err := json.Marshal(res)
			return protocol.OperationCallResult{Output: out}, err
		}}
	}
	// The echo hands its input back as its output, as ext-jsonrpc's echo
	// hands back its params: both sides do the same work. (It went through
	// op's json.Marshal before, which re-validated and compacted the input
	// on this side only: about 3 µs of CPU an echo the bare side never
	// spent.) It answers from its call alone, so it is a Pure operation,
	// which the SDK serves on the reader (Inline), as ext-jsonrpc serves
	// its echo.
	ops[workload.MethodEcho] = sdk.Operation{Pure: func(c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
		return protocol.OperationCallResult{Output: c.Input}, nil
	}}
	op(workload.MethodFail, func(_ context.Context, _ *sdk.Host, in json.RawMessage) (any, error) {
		return nil, p.Fail(decode[workload.FailParams](in))
	})
	op(workload.MethodCallback, func(ctx context.Context, h *sdk.Host, in json.RawMessage) (any, error) {
		// Each callback is a real host method: a read of the store.
		return p.Callback(ctx, func(ctx context.Context, _ string, params, result any) error {
			if _, err := h.Sequence(ctx); err != nil {
				return err
			}
			*result.(*workload.HostEcho) = params.(workload.HostEcho)
			return nil
		}, decode[workload.CallbackParams](in))
	})
	op(workload.MethodPush, func(ctx context.Context, h *sdk.Host, in json.RawMessage) (any, error) {
		v := decode[workload.PushParams](in)
		value, _ := json.Marshal(v.Value)
		if _, err := h.Commit(ctx, protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: workload.KVNamespace, Key: v.Value, Value: value}}}); err != nil {
			return nil, err
		}
		return workload.PushResult{HostAnswer: v.Value + " received"}, nil
	})
	op(workload.MethodBlock, func(ctx context.Context, _ *sdk.Host, in json.RawMessage) (any, error) {
		return nil, p.Block(ctx, never, decode[workload.TokenParams](in))
	})
	op(workload.MethodBlockStart, func(ctx context.Context, _ *sdk.Host, in json.RawMessage) (any, error) {
		return p.BlockStarted(ctx, decode[workload.TokenParams](in))
	})
	op(workload.MethodCancelSeen, func(ctx context.Context, _ *sdk.Host, in json.RawMessage) (any, error) {
		return p.CancelSeen(ctx, decode[workload.TokenParams](in))
	})
	op(workload.MethodRelease, func(_ context.Context, _ *sdk.Host, in json.RawMessage) (any, error) {
		return p.Release(decode[workload.TokenParams](in)), nil
	})
	op(workload.MethodCrash, func(context.Context, *sdk.Host, json.RawMessage) (any, error) { return nil, p.DoCrash() })
	op(workload.MethodStdout, func(context.Context, *sdk.Host, json.RawMessage) (any, error) {
		_, err := fmt.Fprint(os.Stdout, workload.StrayOutput) // the SDK moved os.Stdout to stderr
		return workload.OK{OK: err == nil}, err
	})
	op(workload.MethodUpload, func(ctx context.Context, h *sdk.Host, in json.RawMessage) (any, error) {
		u := decode[workload.UploadParams](in)
		data, _ := workload.Data(u.Bytes, u.Seed)
		w, err := h.CreateArtifact(ctx, protocol.ArtifactCreateParams{RunID: u.RunID, Name: "upload-" + strconv.Itoa(u.Bytes)})
		if err != nil {
			return nil, err
		}
		start := time.Now()
		for off := 0; off < len(data); off += u.Chunk {
			if _, err := w.Write(data[off:min(off+u.Chunk, len(data))]); err != nil {
				return nil, err
			}
			if err := w.Flush(); err != nil { // one chunk each, sent once the one before was acknowledged
				return nil, err
			}
		}
		took := time.Since(start)
		res, err := w.Commit()
		if err != nil {
			return nil, err
		}
		return workload.CommitResult{Bytes: res.Size, SHA256: res.SHA256, ChunksNanos: int64(took)}, nil
	})
	ext := &sdk.Extension{
		Manifest:   workload.Manifest,
		Operations: ops,
		Executors: map[string]sdk.Executor{"bench": {
			Run: func(context.Context, *sdk.Host, protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
				return protocol.ExecutorRunResult{}, protocol.NewError(protocol.CodeUnsupported, "the bench executor runs nothing")
			},
			Wait: func(context.Context, *sdk.Host, protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
				return protocol.ExecutorWaitResult{}, protocol.NewError(protocol.CodeUnsupported, "the bench executor runs nothing")
			},
			Recover: func(context.Context, *sdk.Host, protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
				return protocol.ExecutorRecoverResult{}, protocol.ErrNotAdoptable
			},
		}},
	}
	if path := os.Getenv("TRANSPORT_EXT_CPUPROFILE"); path != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid())); err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
			// The host may end the process with SIGTERM once its stdin is
			// closed: keep the profile then too.
			term := make(chan os.Signal, 1)
			signal.Notify(term, syscall.SIGTERM)
			go func() {
				<-term
				pprof.StopCPUProfile()
				os.Exit(0)
			}()
		}
	}
	if err := sdk.Serve(ext); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// never is the Block's "connection gone": the process ends with it.
var never = make(chan struct{})

func decode[T any](raw json.RawMessage) T {
	var v T
	_ = json.Unmarshal(raw, &v)
	return v
}

// protocolError carries the workload's authored errors as protocol errors.
func protocolError(err error) error {
	var a *workload.Authored
	if errors.As(err, &a) {
		return protocol.NewError(protocol.Code(a.Code), a.Message)
	}
	return err
}
