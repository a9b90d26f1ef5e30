package host

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// Conn is a running package as the adapters call it: a supervised
// process, or an extension attached in process.
type Conn interface {
	Call(ctx context.Context, method string, params, result any) error
	CallInTx(ctx context.Context, method string, params, result any) error
	Manifest() *protocol.Manifest
	// Service is the host service bound to the package.
	Service() *Service
	// Generation changes whenever the package's process is replaced.
	Generation() uint64
}

var (
	_ Conn = (*Process)(nil)
	_ Conn = (*Attached)(nil)
)

// Attached is an extension wired to the host in process, with no JSON:
// the host calls it through ext (what sdk.Attach returns for the
// extension, given svc as its host), and it calls the host through svc.
// The same suites run against it and against a process.
type Attached struct {
	ext      Caller
	svc      *Service
	deadline time.Duration
}

// Attach runs the handshake with an in-process extension: initialize
// (naming the directories under stateRoot a process would get, none when
// it is empty; the manifest it answers must mean the same as svc's) and
// configure with params, whose registrations are checked as a process's
// are.
func Attach(ctx context.Context, ext Caller, svc *Service, stateRoot string, params protocol.ConfigureParams) (*Attached, error) {
	m := svc.cfg.Manifest
	var init protocol.InitializeResult
	if err := ext.Call(ctx, "initialize", InitializeParams(stateRoot, m), &init); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if !protocol.Supported(init.ProtocolVersion) {
		return nil, fmt.Errorf("%w: %s chose protocol version %d", ErrRefused, m.Name, init.ProtocolVersion)
	}
	if init.Manifest != nil {
		got, err := protocol.DecodeManifest(init.Manifest)
		if err != nil || !reflect.DeepEqual(got, m) {
			return nil, fmt.Errorf("%w: %s: the manifest initialize returned differs", ErrRefused, m.Name)
		}
	}
	params.KV = protocol.KVLayout{Stored: m.KVVersion, Declared: m.KVVersion}
	var res protocol.ConfigureResult
	if err := ext.Call(ctx, "configure", params, &res); err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	if err := svc.Configure(params, res); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRefused, m.Name, err)
	}
	return &Attached{ext: ext, svc: svc, deadline: protocol.InTransactionDeadline}, nil
}

// Call calls the extension.
func (a *Attached) Call(ctx context.Context, method string, params, result any) error {
	return a.ext.Call(ctx, method, params, result)
}

// CallInTx is a bounded in-transaction call, as Process.CallInTx.
func (a *Attached) CallInTx(ctx context.Context, method string, params, result any) error {
	return callInTx(ctx, a.svc, a.deadline, a.ext, method, params, result)
}

// Manifest is the extension's manifest.
func (a *Attached) Manifest() *protocol.Manifest { return a.svc.cfg.Manifest }

// Service is the host service the extension calls.
func (a *Attached) Service() *Service { return a.svc }

// Generation is constant: an attached extension is never restarted.
func (a *Attached) Generation() uint64 { return 1 }
