package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// The answer checks of criteria version 2: what check.run, task.run and
// validate answer, and which host methods the package calls.

// checkCode is the shape of a check's code (the spec's stable codes).
var checkCode = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CheckPackageChecks runs each declared doctor check: check.run must
// answer one of its two shapes, {ok, detail} or a full check whose status
// is ok, info, warn or fail and whose code, when it gives one, matches
// [a-z][a-z0-9_]*. The fields of the other shape may not be mixed in.
func CheckPackageChecks(ctx context.Context, d PackageDriver) error {
	checks := d.Manifest().Provides.Checks
	if len(checks) == 0 {
		return notApplicable("the manifest declares no doctor check")
	}
	var errs []error
	for _, c := range checks {
		var raw json.RawMessage
		if err := d.Call(ctx, "check.run", protocol.CheckRunParams{Check: c.Name, Config: json.RawMessage(`{}`)}, &raw); err != nil {
			errs = append(errs, fmt.Errorf("check %s: check.run: %w", c.Name, err))
			continue
		}
		if err := checkAnswerShape(raw); err != nil {
			errs = append(errs, fmt.Errorf("check %s: check.run answered %s: %w", c.Name, clip(string(raw), 200), err))
		}
	}
	return errors.Join(errs...)
}

// checkAnswerShape decides one check.run answer.
func checkAnswerShape(raw json.RawMessage) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return errors.New("it is not a JSON object")
	}
	var res protocol.CheckRunResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("its fields do not decode: %v", err)
	}
	for k := range fields {
		switch k {
		case "ok", "status", "code", "detail", "items":
		default:
			return fmt.Errorf("field %q is in neither shape", k)
		}
	}
	_, hasStatus := fields["status"]
	if !hasStatus {
		if _, ok := fields["ok"]; !ok {
			return errors.New("it has neither status nor ok")
		}
		for _, k := range []string{"code", "items"} {
			if _, ok := fields[k]; ok {
				return fmt.Errorf("an {ok, detail} answer carries %q, a field of the full shape", k)
			}
		}
		return nil
	}
	if _, ok := fields["ok"]; ok {
		return errors.New("a full check (with status) carries ok, the field of the other shape")
	}
	switch res.Status {
	case protocol.CheckOK, protocol.CheckInfo, protocol.CheckWarn, protocol.CheckFail:
	default:
		return fmt.Errorf("status %q is not ok, info, warn or fail", res.Status)
	}
	if _, ok := fields["code"]; ok && !checkCode.MatchString(res.Code) {
		return fmt.Errorf("code %q does not match %s", res.Code, checkCode)
	}
	return nil
}

// CheckPackageTasks runs each declared task once: task.run must answer
// within the task's interval, or the host's next run would find it still
// running.
func CheckPackageTasks(ctx context.Context, d PackageDriver) error {
	tasks := d.Manifest().Provides.Tasks
	if len(tasks) == 0 {
		return notApplicable("the manifest declares no task")
	}
	var errs []error
	for _, t := range tasks {
		interval, err := time.ParseDuration(t.Interval)
		if err != nil {
			errs = append(errs, fmt.Errorf("task %s: interval %q: %v", t.Name, t.Interval, err))
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, interval)
		c := observe(tctx, d, "task.run", protocol.TaskRunParams{Task: t.Name, Now: certifyNow}, nil)
		cancel()
		switch {
		case errors.Is(c.err, context.DeadlineExceeded) && ctx.Err() == nil, c.err == nil && c.elapsed > interval:
			errs = append(errs, fmt.Errorf("task %s: task.run did not finish within its interval of %s", t.Name, interval))
			// It may still be stuck in the pass: replace it for the next check.
			if err := d.Restart(ctx); err != nil {
				return errors.Join(append(errs, fmt.Errorf("restarting the package: %w", err))...)
			}
		case c.err != nil && !serving(c.err):
			errs = append(errs, fmt.Errorf("task %s: task.run: %w", t.Name, c.err))
		}
	}
	return errors.Join(errs...)
}

// ValidateMessageBytes bounds the message of a binding's validate refusal,
// which config check shows as the binding_refused reason.
const ValidateMessageBytes = 300

// validateProbe is a config value certification plants in every object it
// asks validate about: a refusal must never echo it.
const validateProbe = "certify-probe-value-5b2e7d"

// validateCase is one validate question.
type validateCase struct {
	what   string
	params protocol.ValidateParams
	// echo is the text a description or warning may not contain: the
	// probe itself when it sits under an unknown member (a package that
	// read only its own fields cannot name it), or the member as written
	// when it sits in a declared field, whose value a description may name
	// but whose config text it may not copy. Empty when nothing is
	// planted.
	echo string
}

// declaredFields are the config fields a type declares (its fields, and
// for an extension type its string settings) that the probe is planted
// in, one at a time: a strict package accepts a config of its own fields,
// so its description is checked too. Secret fields are keys of
// secret_refs, not config, and are left out.
func declaredFields(fields []protocol.FieldDecl, settings []protocol.SettingDecl) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range settings {
		if s.Type == protocol.SettingString && !seen[s.Field] {
			seen[s.Field] = true
			out = append(out, s.Field)
		}
	}
	for _, f := range fields {
		if !f.Secret && !seen[f.Name] {
			seen[f.Name] = true
			out = append(out, f.Name)
		}
	}
	return out
}

// validateCases asks about one object of every type the manifest declares:
// each extension type, connection type, route handler (and its binding,
// for a handler declared with binding) and executor, once with the empty
// config certification configures, once with the probe under an unknown
// member, and twice per declared field, with the probe and with the empty
// string as that field's value.
func validateCases(d PackageDriver) []validateCase {
	m := d.Manifest()
	probe := json.RawMessage(fmt.Sprintf(`{"certify_probe":%q}`, validateProbe))
	var out []validateCase
	// Each object is asked about twice: as certification configures it
	// (an empty config), and with the probe planted in it.
	// Each declared field is then asked about with the probe as its value.
	add := func(what, kind, typ string, fields []string, edit func(*protocol.ValidateParams)) {
		type config struct {
			what, echo string
			raw        json.RawMessage
		}
		configs := []config{{what: what, raw: json.RawMessage(`{}`)}, {what: what, echo: validateProbe, raw: probe}}
		// The field is set to the probe, and to the empty string: a package
		// may describe an empty field as unset, so the copied text shows
		// even where a set value changes the description.
		for _, f := range fields {
			for _, v := range []string{validateProbe, ""} {
				member := fmt.Sprintf(`%q:%q`, f, v)
				configs = append(configs, config{what: fmt.Sprintf("%s (config %s)", what, member), echo: member, raw: json.RawMessage("{" + member + "}")})
			}
		}
		for _, c := range configs {
			p := protocol.ValidateParams{Kind: kind, Type: typ, ScopeID: scope(d), ID: "certify-" + typ, Config: c.raw}
			if edit != nil {
				edit(&p)
			}
			if p.Binding != nil {
				// The binding view carries the probe in every case.
				c.echo = validateProbe
			}
			out = append(out, validateCase{what: c.what, params: p, echo: c.echo})
		}
	}
	for _, x := range m.Provides.Extensions {
		add("extension type "+x.Type, protocol.ValidateExtension, x.Type, declaredFields(x.Fields, x.Settings), nil)
	}
	for _, c := range m.Provides.Connections {
		secrets := []string{}
		for _, f := range c.Fields {
			if f.Secret {
				secrets = append(secrets, f.Name)
			}
		}
		add("connection type "+c.Type, protocol.ValidateConnection, c.Type, declaredFields(c.Fields, nil), func(p *protocol.ValidateParams) {
			p.ScopeID, p.SecretNames = "", secrets
		})
	}
	for _, r := range m.Provides.Routes {
		add("route "+r.Handler, protocol.ValidateRoute, r.Handler, declaredFields(r.Fields, nil), nil)
		if r.Binding {
			add("the binding of route "+r.Handler, protocol.ValidateBinding, r.Handler, nil, func(p *protocol.ValidateParams) {
				p.Config = nil
				p.Binding = &protocol.BindingView{Name: "certify-binding", Executor: validateProbe, ExecutorConfig: probe,
					Operations: []string{validateProbe}, Connection: validateProbe}
			})
		}
	}
	for _, x := range m.Provides.Executors {
		add("executor "+x.Name, protocol.ValidateExecutor, x.Name, declaredFields(x.Fields, nil), nil)
	}
	return out
}

// CheckPackageValidate asks validate about one object of every type the
// manifest declares (validateCases): each must be answered, a description
// or a refusal, never method not found or silence. A description or
// warning may not copy the config's text (the probe under an unknown
// member, or a declared member as written). A refusal's message must be
// one line that names no config value (the planted probe); a
// binding's refusal, which config check shows, at most
// ValidateMessageBytes.
func CheckPackageValidate(ctx context.Context, d PackageDriver) error {
	cases := validateCases(d)
	if len(cases) == 0 {
		return notApplicable("the manifest declares no type to validate (no extension type, connection type, route or executor)")
	}
	var errs []error
	for _, c := range cases {
		var res protocol.ValidateResult
		err := d.Call(ctx, "validate", c.params, &res)
		var perr *protocol.Error
		switch {
		case err == nil:
			for _, l := range append(append([]string{}, res.Describe...), res.Warnings...) {
				if c.echo != "" && strings.Contains(l, c.echo) {
					errs = append(errs, fmt.Errorf("%s: validate's description echoes a config value: %q", c.what, clip(l, 200)))
				}
			}
			continue
		case !errors.As(err, &perr) || !serving(err):
			errs = append(errs, fmt.Errorf("%s: validate was not answered: %w", c.what, err))
			continue
		case perr.Code == protocol.CodeMethodNotFound || perr.Code == protocol.CodeUndeclared:
			errs = append(errs, fmt.Errorf("%s: validate is not served (%s); the package must answer it for every type it declares", c.what, perr.Code))
			continue
		}
		msg := perr.Message
		if !oneLine(msg) {
			errs = append(errs, fmt.Errorf("%s: validate's refusal is not one line: %q", c.what, clip(msg, 200)))
		}
		if c.params.Kind == protocol.ValidateBinding && len(msg) > ValidateMessageBytes {
			errs = append(errs, fmt.Errorf("%s: validate's refusal is %d bytes; at most %d", c.what, len(msg), ValidateMessageBytes))
		}
		if strings.Contains(msg, validateProbe) {
			errs = append(errs, fmt.Errorf("%s: validate's refusal echoes a config value: %q", c.what, clip(msg, 200)))
		}
	}
	return errors.Join(errs...)
}

// CheckPackagePermissions exercises every declared surface, then reads the
// whole wire of the run so far: the package must never have called a host
// method its manifest does not enable (the host answers those undeclared).
func CheckPackagePermissions(ctx context.Context, d PackageDriver) error {
	if err := exercise(ctx, d); err != nil {
		return err
	}
	m := d.Manifest()
	msgs := decodeWire(d.Wire(), 0)
	var errs []error
	seen := map[string]bool{}
	for i, c := range msgs {
		if !c.fromExtension || !c.json || !c.request() || seen[c.Method] {
			continue
		}
		undeclared := !m.Enabled(c.Method)
		if !undeclared {
			for _, a := range msgs[i+1:] {
				if !a.fromExtension && a.json && !a.request() && string(a.ID) == string(c.ID) {
					undeclared = a.errorCode() == protocol.CodeUndeclared
					break
				}
			}
		}
		if undeclared {
			seen[c.Method] = true
			errs = append(errs, atWire(c.index, fmt.Errorf("the package called %s, which its manifest does not enable (the host answers it undeclared)", c.Method)))
		}
	}
	return errors.Join(errs...)
}

// WaitProgressBytes bounds a wait's progress line.
const WaitProgressBytes = 120

// CheckPackageWaitProgress exercises every declared surface, then reads
// every wait.progress the package sent over the run so far: each must be
// one line of at most WaitProgressBytes, and for a Work whose active Wait
// is its own (the host answers another's unauthorized). A package that
// set no progress is not applicable.
func CheckPackageWaitProgress(ctx context.Context, d PackageDriver) error {
	if err := exercise(ctx, d); err != nil {
		return err
	}
	msgs := decodeWire(d.Wire(), 0)
	var errs []error
	sent := 0
	for i, c := range msgs {
		if !c.fromExtension || !c.json || !c.request() || c.Method != "wait.progress" {
			continue
		}
		sent++
		var p protocol.WaitProgressParams
		if err := json.Unmarshal(c.Params, &p); err != nil {
			errs = append(errs, atWire(c.index, fmt.Errorf("wait.progress params do not decode: %v", err)))
			continue
		}
		if !oneLine(p.Progress) {
			errs = append(errs, atWire(c.index, fmt.Errorf("wait.progress for Work %s is not one line: %q", clip(p.WorkID, 60), clip(p.Progress, 160))))
		}
		if len(p.Progress) > WaitProgressBytes {
			errs = append(errs, atWire(c.index, fmt.Errorf("wait.progress for Work %s is %d bytes; at most %d", clip(p.WorkID, 60), len(p.Progress), WaitProgressBytes)))
		}
		for _, a := range msgs[i+1:] {
			if !a.fromExtension && a.json && !a.request() && string(a.ID) == string(c.ID) {
				if a.errorCode() == protocol.CodeUnauthorized {
					errs = append(errs, atWire(c.index, fmt.Errorf("wait.progress for Work %s, whose active Wait the package did not declare (the host answered unauthorized)", clip(p.WorkID, 60))))
				}
				break
			}
		}
	}
	if len(errs) == 0 && sent == 0 {
		return notApplicable("the package set no wait progress while certification exercised it")
	}
	return errors.Join(distinct(errs)...)
}

// distinct keeps the first of errors with the same message: a defect the
// package repeats on every call is reported once.
func distinct(errs []error) []error {
	seen := map[string]bool{}
	var out []error
	for _, err := range errs {
		if !seen[err.Error()] {
			seen[err.Error()] = true
			out = append(out, err)
		}
	}
	return out
}
