package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/open-conduit/open-conduit/protocol"
)

// The wire checks of criteria version 2 drive a spare process below the
// message layer: a raw line on its stdin, a signal. A driver's RawPackage
// offers them through the optional interfaces below; a check whose spare
// process lacks one is not applicable (a skip, never a pass).

// RawStdin is a RawPackage that can write bytes to the process's stdin
// as they are, not framed as a message.
type RawStdin interface {
	WriteStdin(b []byte) error
}

// Signaller is a RawPackage that can signal its process.
type Signaller interface {
	Signal(sig os.Signal) error
}

// unknownMethod is a method no catalogue holds.
const unknownMethod = "certify.no_such_method"

// CheckPackageMethodNotFound calls a method no catalogue holds on a spare
// process after its handshake: the package must answer JSON-RPC -32601 on
// the wire (not an authored error, a result or silence) and keep serving.
func CheckPackageMethodNotFound(ctx context.Context, d PackageDriver) error {
	return withSpare(ctx, d, func(p RawPackage) error {
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before the unknown method: %w", err)
		}
		from := len(d.Wire())
		err := p.Call(ctx, unknownMethod, map[string]any{}, nil)
		if !serving(err) {
			return fmt.Errorf("%s was not answered: %w", unknownMethod, err)
		}
		if err == nil {
			return fmt.Errorf("%s, a method no catalogue holds, was answered with a result; it must be refused -32601", unknownMethod)
		}
		var errs []error
		if code, at, ok := answerCode(d.Wire(), from, unknownMethod); !ok {
			errs = append(errs, fmt.Errorf("the answer to %s is not on the wire", unknownMethod))
		} else if code != protocol.WireMethodNotFound {
			errs = append(errs, atWire(at, fmt.Errorf("%s was refused with JSON-RPC code %d; a method the package does not serve is -32601 (method not found)", unknownMethod, code)))
		}
		if err := p.Call(ctx, "configure", d.ConfigureParams(), nil); err != nil {
			errs = append(errs, fmt.Errorf("after %s the package no longer serves: %w", unknownMethod, err))
		}
		return errors.Join(errs...)
	})
}

// answerCode finds, in the wire from line from, the host's request of
// method and the package's error answer to it: its JSON-RPC code and line.
func answerCode(lines []WireLine, from int, method string) (code, at int, ok bool) {
	msgs := decodeWire(lines, from)
	for i, m := range msgs {
		if m.fromExtension || !m.json || !m.request() || m.Method != method {
			continue
		}
		for _, a := range msgs[i+1:] {
			if a.fromExtension && a.json && !a.request() && bytes.Equal(a.ID, m.ID) && a.Error != nil {
				return a.Error.Code, a.index, true
			}
		}
	}
	return 0, 0, false
}

// beforeInitialize are the requests certification makes before initialize:
// configure and validate, every host-to-extension method the manifest
// enables, and shutdown last, each with params the package would serve
// after initialize where certification can build them (preInitParams), so
// only the missing handshake can explain a refusal.
func beforeInitialize(d PackageDriver) []string {
	out := []string{"configure", "validate"}
	for _, mt := range d.Manifest().EnabledMethods() {
		if mt.Direction == protocol.ExtensionToHost || mt.Notification || slices.Contains([]string{"initialize", "configure", "shutdown", "validate"}, mt.Name) {
			continue
		}
		out = append(out, mt.Name)
	}
	return append(out, "shutdown")
}

// preInitParams are the params of method before initialize: those the
// checks use after it for the first declared name, else an empty object.
func preInitParams(d PackageDriver, method string) any {
	m := d.Manifest()
	p := m.Provides
	switch method {
	case "configure":
		return d.ConfigureParams()
	case "validate":
		if cs := validateCases(d); len(cs) > 0 {
			return cs[0].params
		}
	case "task.run":
		if len(p.Tasks) > 0 {
			return protocol.TaskRunParams{Task: p.Tasks[0].Name, Now: certifyNow}
		}
	case "check.run":
		if len(p.Checks) > 0 {
			return protocol.CheckRunParams{Check: p.Checks[0].Name, Config: json.RawMessage(`{}`)}
		}
	case "route.match":
		if events := syntheticEvents(d); len(p.Routes) > 0 && len(events) > 0 {
			return protocol.RouteMatchParams{Handler: p.Routes[0].Handler, ScopeID: scope(d), Event: events[0]}
		}
	case "recurrence.next":
		if len(p.Recurrences) > 0 {
			return recurrenceParams(d, p.Recurrences[0].Name)
		}
	case "operation.call", "operation.wait", "operation.emit":
		for _, o := range p.Operations {
			if in := operationInputs(d, o); len(in) > 0 {
				if m, params := operationRequest(d, o, "certify-before-initialize", in[0]); m == method {
					return params
				}
			}
		}
	}
	return map[string]any{}
}

// CheckPackageInitializeFirst sends, on a spare process, every request the
// package could serve before initialize (beforeInitialize): each must be
// refused, and initialize and configure must then succeed.
func CheckPackageInitializeFirst(ctx context.Context, d PackageDriver) error {
	return withSpare(ctx, d, func(p RawPackage) error {
		var errs []error
		for _, method := range beforeInitialize(d) {
			err := p.Call(ctx, method, preInitParams(d, method), nil)
			switch {
			case err == nil:
				errs = append(errs, fmt.Errorf("%s before initialize was served; no method but initialize is valid until it succeeds", method))
			case !serving(err):
				return errors.Join(append(errs, fmt.Errorf("%s before initialize was not answered: %w", method, err))...)
			}
		}
		if err := handshake(ctx, d, p); err != nil {
			errs = append(errs, fmt.Errorf("after the refusals: %w", err))
		}
		return errors.Join(errs...)
	})
}

// CheckPackageMalformedInput writes, on two spare processes after their
// handshake, a line that is not JSON and a request longer than
// protocol.MaxMessageBytes: each is a protocol error that must close the
// connection, so the package must exit within PackageExitBound.
func CheckPackageMalformedInput(ctx context.Context, d PackageDriver) error {
	huge := func() []byte {
		var b bytes.Buffer
		b.WriteString(`{"jsonrpc":"2.0","id":424242,"method":"configure","params":{"certify_padding":"`)
		b.Write(bytes.Repeat([]byte("x"), protocol.MaxMessageBytes))
		b.WriteString(`"}}` + "\n")
		return b.Bytes()
	}
	cases := []struct {
		what string
		line func() []byte
	}{
		{"a line that is not JSON", func() []byte { return []byte("{certify: this is not JSON\n") }},
		{fmt.Sprintf("a request of more than %d bytes", protocol.MaxMessageBytes), huge},
	}
	// The two spares run at once: a package that keeps its connection
	// open costs one exit bound, not two.
	results := make(chan error, len(cases))
	for _, tc := range cases {
		go func() {
			results <- withSpare(ctx, d, func(p RawPackage) error {
				raw, ok := p.(RawStdin)
				if !ok {
					return notApplicable("the driver's spare process cannot write raw lines (RawStdin)")
				}
				if err := handshake(ctx, d, p); err != nil {
					return fmt.Errorf("before %s: %w", tc.what, err)
				}
				// A package that stops reading without exiting would block
				// the write: it runs aside, and the spare's kill ends it.
				go func() { _ = raw.WriteStdin(tc.line()) }()
				if !waitExit(ctx, p, PackageExitBound) {
					return fmt.Errorf("after %s the package kept the connection open for %v; a protocol error closes it", tc.what, PackageExitBound)
				}
				return nil
			})
		}()
	}
	var errs []error
	for range cases {
		err := <-results
		if errors.Is(err, ErrNotApplicable) {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckPackageSigterm sends SIGTERM to a spare process after its
// handshake, as the host does after shutdown's grace: the package must
// exit within PackageExitBound.
func CheckPackageSigterm(ctx context.Context, d PackageDriver) error {
	return withSpare(ctx, d, func(p RawPackage) error {
		s, ok := p.(Signaller)
		if !ok {
			return notApplicable("the driver's spare process cannot be signalled (Signaller)")
		}
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before SIGTERM: %w", err)
		}
		if err := s.Signal(syscall.SIGTERM); err != nil {
			return fmt.Errorf("sending SIGTERM: %w", err)
		}
		if !waitExit(ctx, p, PackageExitBound) {
			return fmt.Errorf("the package kept running %v after SIGTERM; the host kills it after its grace period", PackageExitBound)
		}
		return nil
	})
}

// oneLine reports whether s is a single line.
func oneLine(s string) bool { return !strings.ContainsAny(s, "\r\n") }
