package mutants

import (
	"slices"
	"strings"
)

// The files the table edits, by module path.
const (
	notesGo        = "extensions/notes/notes.go"
	notesDisplay   = "extensions/notes/display.go"
	notesCheck     = "extensions/notes/check.go"
	notesValidate  = "extensions/notes/validate.go"
	notesMigrate   = "extensions/notes/migrate.go"
	scheduleGo     = "extensions/schedule/schedule.go"
	scheduleRecur  = "extensions/schedule/recurrence.go"
	scheduleValid  = "extensions/schedule/validate.go"
	sdkServer      = "protocol/sdk/server.go"
	sdkServe       = "protocol/sdk/serve.go"
	sdkHost        = "protocol/sdk/host.go"
	sdkOnce        = "protocol/sdk/once.go"
	jobsGo         = "protocol/sdk/jobs/jobs.go"
	importRandNext = "\"fmt\"\n\t\"slices\"" // schedule.go's imports, where crypto/rand and time go
)

func edit(file, old, new string) Edit { return Edit{File: file, Old: old, New: new} }

// All is every mutant, sorted by name. Adding one is adding its entry to
// the list it belongs to below.
func All() []Mutant {
	all := slices.Concat(notesMutants, scheduleMutants, jobMutants, executorMutants("runner"), executorMutants("shell"), sdkMutants)
	slices.SortFunc(all, func(a, b Mutant) int { return strings.Compare(a.Name, b.Name) })
	return all
}

// Lookup returns the mutant named name, among All and Controls.
func Lookup(name string) (Mutant, bool) {
	for _, m := range append(All(), Controls()...) {
		if m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}

// Sample is the fixed subset `go test ./...` certifies: one mutant of each
// package and one of the SDK, each caught by a different criterion, so a
// broken generator or a weakened criterion shows in every run. The whole
// table runs with OPEN_CONDUIT_MUTANTS=all.
var Sample = []string{
	"notes/add-without-intent",
	"runner/inject-drops-text",
	"schedule/match-impure",
	"shell/success-reported-failed",
	"sdk/serves-before-initialize",
}

// Controls are the self-check's own negative controls, not counted in the
// kill rate: an edit nothing can observe, which must survive (so a kill
// means a criterion saw the edit, not that the harness broke everything).
func Controls() []Mutant {
	return []Mutant{{
		Name:    "control/equivalent-log-text",
		Package: "notes",
		Breaks:  "nothing: it rewords a line the SDK logs to stderr when a handler panics",
		Caught:  "",
		Edits:   []Edit{edit(sdkServer, `"%s: handler panicked: %v\n%s"`, `"%s: the handler panicked: %v\n%s"`)},
	}}
}

var notesMutants = []Mutant{
	{
		Name: "notes/migration-recounts", Package: "notes", Caught: "kv/migration",
		Breaks: "a KV migration is idempotent: run again from the same stored layout, it writes nothing",
		Edits: []Edit{edit(notesMigrate, "\t\tif err != nil || (found && count.Notes == n) {\n\t\t\treturn err\n\t\t}\n\t\treturn t.Put(NamespaceIndex, countKey, noteCount{Notes: n})",
			"\t\tif err != nil || (found && count.Notes < 0) {\n\t\t\treturn err\n\t\t}\n\t\treturn t.Put(NamespaceIndex, countKey, noteCount{Notes: count.Notes + n})")},
	},
	{
		Name: "notes/migration-keeps-legacy", Package: "notes", Caught: "kv/migration",
		Breaks: "a KV migration leaves the layout the current release reads (layout 0's records moved, not copied)",
		Edits:  []Edit{edit(notesMigrate, "\t\t\t\tt.Delete(NamespaceLegacy, item.Key)\n", "")},
	},
	{
		Name: "notes/display-title-unclipped", Package: "notes", Caught: "routes/display",
		Breaks: "a Work display's title is one line of at most 200 bytes",
		Edits:  []Edit{edit(notesDisplay, `d := &protocol.Display{Title: clip(n.Title, maxTitleBytes),`, `d := &protocol.Display{Title: n.Title,`)},
	},
	{
		Name: "notes/display-link-any-scheme", Package: "notes", Caught: "routes/display",
		Breaks: "a display links only to http or https URLs",
		Edits:  []Edit{edit(notesDisplay, `(u.Scheme != "http" && u.Scheme != "https")`, `u.Scheme == ""`)},
	},
	{
		Name: "notes/match-impure", Package: "notes", Caught: "routes/pure",
		Breaks: "route.match decides from its input alone and answers the same input the same way",
		Edits: []Edit{edit(notesGo, `Reason: fmt.Sprintf("note %s", n.ID)}, nil`,
			`Reason: fmt.Sprintf("note %s (%s)", n.ID, rand.Text())}, nil`)},
	},
	{
		Name: "notes/add-without-intent", Package: "notes", Caught: "operations/idempotent",
		Breaks: "a handler operation called again with the same request ID makes its effect once",
		Edits:  []Edit{edit(notesGo, `key = sdk.IntentKey(call.RequestID, OpAdd)`, `key = ""`)},
	},
	{
		Name: "notes/publish-random-identity", Package: "notes", Caught: "emissions/idempotent",
		Breaks: "the same request ID names the same emitted Event",
		Edits:  []Edit{edit(notesGo, `seed := "request:" + call.RequestID`, `seed := "request:" + call.RequestID + rand.Text()`)},
	},
	{
		Name: "notes/publish-writes-when-planning", Package: "notes", Caught: "emissions/atomic",
		Breaks: "an emit operation writes its records only inside the emission's transaction (emit.commit), never while planning",
		Edits: []Edit{edit(notesGo, `	ev := protocol.EventDraft{Source: Name, DeliveryID: "publish/" + id,`,
			`	if _, err := host.Update(ctx, func(t *sdk.Txn) error { return t.Put(NamespacePublished, id, publishCommit{Note: id}) }); err != nil {
		return protocol.OperationEmitResult{}, err
	}
	ev := protocol.EventDraft{Source: Name, DeliveryID: "publish/" + id,`)},
	},
	{
		Name: "notes/commit-foreign-namespace", Package: "notes", Caught: "emissions/atomic",
		Breaks: "emit.commit writes only in the package's own KV namespaces",
		Edits:  []Edit{edit(notesGo, `{{Namespace: NamespacePublished, Key: c.Note, Value: rec}}`, `{{Namespace: "published", Key: c.Note, Value: rec}}`)},
	},
	{
		Name: "notes/commit-nondeterministic", Package: "notes", Caught: "transactions/deadline",
		Breaks: "an in-transaction method answers the same input the same way (the host may run the transaction again)",
		Edits:  []Edit{edit(notesGo, `{{Namespace: NamespacePublished, Key: c.Note, Value: rec}}`, `{{Namespace: NamespacePublished, Key: c.Note + "." + rand.Text(), Value: rec}}`)},
	},
	{
		Name: "notes/check-unknown-status", Package: "notes", Caught: "checks/shape",
		Breaks: "check.run answers a known status (ok, info, warn, fail)",
		Edits: []Edit{
			edit(notesCheck, `Status: protocol.CheckInfo, Code: "notes_no_entries"`, `Status: "unknown", Code: "notes_no_entries"`),
			edit(notesCheck, `Status: protocol.CheckWarn, Code: "notes_store_unreadable"`, `Status: "degraded", Code: "notes_store_unreadable"`),
			edit(notesCheck, `Status: protocol.CheckOK, Detail:`, `Status: "green", Detail:`),
		},
	},
	{
		Name: "notes/check-code-shape", Package: "notes", Caught: "checks/shape",
		Breaks: "a check's code matches [a-z][a-z0-9_]*",
		Edits: []Edit{
			edit(notesCheck, `Code: "notes_no_entries"`, `Code: "Notes: no entries"`),
			edit(notesCheck, `Code: "notes_store_unreadable"`, `Code: "notes-store-unreadable"`),
			edit(notesCheck, `Status: protocol.CheckOK, Detail:`, `Status: protocol.CheckOK, Code: "Stores OK", Detail:`),
		},
	},
	{
		Name: "notes/kv-foreign-namespace", Package: "notes", Caught: "kv/scoping",
		Breaks: "a package reads and writes only its own KV namespaces (its name, or name. plus a suffix)",
		Edits:  []Edit{edit(notesGo, `NamespaceIndex     = "notes.index"`, `NamespaceIndex     = "index.notes"`)},
	},
	{
		Name: "notes/partial-scan-complete", Package: "notes", Caught: "ingress/stable-scan",
		Breaks: "a reconcile page that names a next page does not claim the scan complete",
		Edits: []Edit{edit(notesGo, "\t} else {\n\t\tres.Complete = true\n\t}\n\treturn res, nil",
			"\t}\n\tres.Complete = true\n\treturn res, nil")},
	},
	{
		Name: "notes/scan-version-unstable", Package: "notes", Caught: "ingress/stable-scan",
		Breaks: "an unchanged item keeps its (item, version) across scans",
		Edits:  []Edit{edit(notesGo, `Version: r.Rev, Event: ev})`, `Version: r.Rev + "." + rand.Text(), Event: ev})`)},
	},
	{
		Name: "notes/delivery-id-unstable", Package: "notes", Caught: "emissions/idempotent",
		Breaks: "the same delivery names the same Events (source and delivery ID)",
		Edits: []Edit{edit(notesGo, `return r.ID + "@" + r.Rev + ".s" + strconv.Itoa(x.codec.version)`,
			`return r.ID + "@" + r.Rev + ".s" + strconv.Itoa(x.codec.version) + "." + rand.Text()`)},
	},
	{
		Name: "notes/sample-old-schema", Package: "notes", Caught: "routes/samples",
		Breaks: "a route sample's payload is one the package may write (its current schema version)",
		Edits: []Edit{edit(notesGo, `Schema: x.codec.schema(), Payload: payload, OccurredAt: p.Now}}}}`,
			`Schema: protocol.SchemaID(SchemaBase, 1), Payload: payload, OccurredAt: p.Now}}}}`)},
	},
	{
		Name: "notes/sample-from-the-future", Package: "notes", Caught: "routes/samples",
		Breaks: "route samples are timed by the host's clock",
		Edits:  []Edit{edit(notesGo, `OccurredAt: p.Now}}}}`, `OccurredAt: p.Now.AddDate(0, 0, 1)}}}}`)},
	},
	{
		Name: "notes/ingress-old-schema", Package: "notes", Caught: "schemas/current-version",
		Breaks: "every payload the package writes carries the current version of its schema",
		Edits: []Edit{edit(notesGo, `Schema: x.codec.schema(), Payload: payload}, nil`,
			`Schema: protocol.SchemaID(SchemaBase, 1), Payload: payload}, nil`)},
	},
	{
		Name: "notes/validate-echoes-config", Package: "notes", Caught: "validate/answers",
		Breaks: "validate never echoes a config value",
		Edits: []Edit{edit(notesValidate, `return protocol.ValidateResult{Describe: []string{"Work for each note"}}, nil`,
			`return protocol.ValidateResult{Describe: []string{"Work for each note of " + string(p.Config)}}, nil`)},
	},
	{
		Name: "notes/validate-multiline-refusal", Package: "notes", Caught: "validate/answers",
		Breaks: "a validate refusal is one line",
		Edits:  []Edit{edit(notesValidate, `"route config: %v", err)`, `"route config:\n  %v", err)`)},
	},
	{
		Name: "notes/recurrence-slow", Package: "notes", Caught: "transactions/deadline",
		Breaks: "recurrence.next answers within the 250 ms in-transaction deadline",
		Edits: []Edit{edit("extensions/notes/digest.go", "\tvar d DigestPayload\n\t_ = json.Unmarshal(p.Timer.Payload, &d)\n",
			"\tvar d DigestPayload\n\t_ = json.Unmarshal(p.Timer.Payload, &d)\n\ttime.Sleep(400 * time.Millisecond)\n")},
	},
	{
		Name: "notes/undeclared-host-call", Package: "notes", Caught: "permissions/declared",
		Breaks: "a package never calls a host method its manifest does not enable",
		Edits: []Edit{edit(notesCheck, "\tentries, _ := x.snapshot()\n",
			"\tentries, _ := x.snapshot()\n\t_ = host.PersistRecovery(ctx, \"doctor\", []byte(`{}`))\n")},
	},
}

var scheduleMutants = []Mutant{
	{
		Name: "schedule/display-multiline-title", Package: "schedule", Caught: "routes/display",
		Breaks: "a Work display's title is one line",
		Edits:  []Edit{edit(scheduleGo, `Display: &protocol.Display{Title: ref.Job}`, `Display: &protocol.Display{Title: ref.Job + "\n" + how}`)},
	},
	{
		Name: "schedule/match-impure", Package: "schedule", Caught: "routes/pure",
		Breaks: "route.match answers the same input the same way",
		Edits: []Edit{
			edit(scheduleGo, importRandNext, "\"crypto/rand\"\n\t\"fmt\"\n\t\"slices\""),
			edit(scheduleGo, `Reason: fmt.Sprintf("job %s/%s %s", ref.Entry, ref.Job, how)}`, `Reason: fmt.Sprintf("job %s/%s %s (%s)", ref.Entry, ref.Job, how, rand.Text())}`),
		},
	},
	{
		Name: "schedule/sample-undeclared-family", Package: "schedule", Caught: "routes/samples",
		Breaks: "a route sample's Event is of a family the manifest declares",
		Edits: []Edit{edit(scheduleGo, `Family: FamilyTriggered, Type: "triggered", Schema: TriggerSchema, Payload: payload, OccurredAt: p.Now}`,
			`Family: "schedule.fired", Type: "triggered", Schema: TriggerSchema, Payload: payload, OccurredAt: p.Now}`)},
	},
	{
		Name: "schedule/sample-foreign-source", Package: "schedule", Caught: "routes/samples",
		Breaks: "a route sample's source is in the package's source namespace",
		Edits:  []Edit{edit(scheduleGo, `Event: protocol.EventDraft{Source: SourceName(p.ScopeID, ref.Entry),`, `Event: protocol.EventDraft{Source: "cron/" + ref.Entry,`)},
	},
	{
		Name: "schedule/recurrence-nondeterministic", Package: "schedule", Caught: "transactions/deadline",
		Breaks: "recurrence.next answers the same input the same way",
		Edits: []Edit{
			edit(scheduleRecur, "\t\"encoding/json\"\n", "\t\"encoding/json\"\n\t\"math/rand/v2\"\n\t\"time\"\n"),
			edit(scheduleRecur, "if err := json.Unmarshal(p.Timer.Payload, &tp); err != nil || !validJobName(tp.Job) {\n\t\treturn protocol.RecurrenceNextResult{}, nil",
				"if err := json.Unmarshal(p.Timer.Payload, &tp); err != nil || !validJobName(tp.Job) {\n\t\treturn protocol.RecurrenceNextResult{Next: p.Now.Add(time.Minute + time.Duration(rand.Int64N(int64(time.Hour))))}, nil"),
			edit(scheduleRecur, "return protocol.RecurrenceNextResult{Next: j.Next(from)}, nil", "return protocol.RecurrenceNextResult{Next: j.Next(from).Add(time.Duration(rand.Int64N(int64(time.Hour))))}, nil"),
		},
	},
	{
		Name: "schedule/recurrence-slow", Package: "schedule", Caught: "transactions/deadline",
		Breaks: "recurrence.next answers within the 250 ms in-transaction deadline",
		Edits: []Edit{
			edit(scheduleRecur, "\t\"encoding/json\"\n", "\t\"encoding/json\"\n\t\"time\"\n"),
			edit(scheduleRecur, "\tvar tp TimerPayload\n\tif err := json.Unmarshal(p.Timer.Payload", "\tvar tp TimerPayload\n\ttime.Sleep(400 * time.Millisecond)\n\tif err := json.Unmarshal(p.Timer.Payload"),
		},
	},
	{
		Name: "schedule/validate-echoes-config", Package: "schedule", Caught: "validate/answers",
		Breaks: "validate never echoes a config value",
		Edits:  []Edit{edit(scheduleValid, `what := "Work for each job"`, `what := "Work for each job of " + string(p.Config)`)},
	},
	{
		Name: "schedule/validate-multiline-refusal", Package: "schedule", Caught: "validate/answers",
		Breaks: "a validate refusal is one line",
		Edits: []Edit{edit(scheduleValid, "return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, \"%v\", err)\n\t\t}\n\t\twhat :=",
			"return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, \"the route config is refused:\\n%v\", err)\n\t\t}\n\t\twhat :=")},
	},
	{
		Name: "schedule/kv-foreign-namespace", Package: "schedule", Caught: "kv/scoping",
		Breaks: "a package reads and writes only its own KV namespaces",
		Edits:  []Edit{edit(scheduleGo, `NamespaceTimers = "schedule.timers"`, `NamespaceTimers = "timers"`)},
	},
}

// jobMutants weaken the job model runner and shell share
// (protocol/sdk/jobs): one mutant per obligation, since an edit of the
// shared code weakens both executors alike. Each is built into one of the
// two (half into each, so both builds of the model are certified) and
// named after that package. What still differs between the executors
// (each one's own file) is weakened per package in executorMutants.
var jobMutants = []Mutant{
	{
		Name: "shell/stop-answers-not-stopped", Package: "shell", Caught: "executor/controls",
		Breaks: "executor.stop of a running run answers stopped once its process group is gone",
		Edits: []Edit{edit(jobsGo, `return protocol.ExecutorStopResult{Stopped: true, Evidence: fmt.Sprintf("process group %d has no process left after %s", pgid, signals)}`,
			`return protocol.ExecutorStopResult{Stopped: false, Evidence: fmt.Sprintf("process group %d has no process left after %s", pgid, signals)}`)},
	},
	{
		Name: "runner/stopped-run-not-settled", Package: "runner", Caught: "executor/controls",
		Breaks: "a stopped run settles (its wait answers a final state)",
		Edits:  []Edit{edit(jobsGo, `j.result = protocol.ExecutorWaitResult{State: "stopped", Error: "stopped"}`, `j.result = protocol.ExecutorWaitResult{State: "running"}`)},
	},
	{
		Name: "shell/stop-without-killing", Package: "shell", Caught: "executor/controls",
		Breaks: "executor.stop answers stopped only once the run's processes are gone",
		Edits: []Edit{edit(jobsGo, "\t\tj.stopped = true\n\t\tj.mu.Unlock()\n\t\treturn x.kill(j.rec, j.done), nil",
			"\t\tj.stopped = true\n\t\tj.mu.Unlock()\n\t\treturn protocol.ExecutorStopResult{Stopped: true, Evidence: \"stopped\"}, nil")},
	},
	{
		Name: "runner/interrupt-fails", Package: "runner", Caught: "executor/controls",
		Breaks: "a declared interrupt label is answered",
		Edits: []Edit{edit(jobsGo, `syscall.Kill(-j.rec.PGID, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {`,
			`syscall.Kill(-j.rec.PGID, syscall.SIGINT); err == nil || !errors.Is(err, syscall.ESRCH) {`)},
	},
	{
		Name: "runner/inject-drops-text", Package: "runner", Caught: "executor/controls",
		Breaks: "a declared inject label takes the text it is given",
		Edits:  []Edit{edit(jobsGo, "\tvar lines []string\n\tif p.Text != \"\" {", "\tvar lines []string\n\tif p.Text != \"\" && false {")},
	},
	{
		Name: "shell/forget-refuses-settled", Package: "shell", Caught: "executor/controls",
		Breaks: "executor.forget drops a settled run",
		Edits: []Edit{edit(jobsGo, "\tif !j.settled() {\n\t\treturn protocol.ExecutorForgetResult{}",
			"\tif j.settled() {\n\t\treturn protocol.ExecutorForgetResult{}")},
	},
	{
		Name: "runner/live-never-live", Package: "runner", Caught: "executor/controls",
		Breaks: "executor.live returns output for a running run",
		Edits:  []Edit{edit(jobsGo, "\tif err != nil || j.settled() {\n\t\treturn protocol.ExecutorLiveResult{}", "\tif err != nil || !j.settled() {\n\t\treturn protocol.ExecutorLiveResult{}")},
	},
	{
		Name: "runner/wait-answers-on-cancel", Package: "runner", Caught: "cancellation/honoured",
		Breaks: "a cancelled executor.wait is answered cancelled or never, not with a result",
		Edits:  []Edit{edit(jobsGo, `return protocol.ExecutorWaitResult{}, ctx.Err()`, `return protocol.ExecutorWaitResult{State: "succeeded"}, nil`)},
	},
	{
		Name: "shell/success-reported-failed", Package: "shell", Caught: "executor/lifecycle",
		Breaks: "wait reports how the run ended (exit status 0 is success)",
		Edits:  []Edit{edit(jobsGo, `j.result = protocol.ExecutorWaitResult{State: "succeeded"}`, `j.result = protocol.ExecutorWaitResult{State: "failed", Error: "exit status 0"}`)},
	},
	{
		Name: "runner/recover-adopts-bogus", Package: "runner", Caught: "executor/lifecycle",
		Breaks: "recover refuses metadata it never wrote as not_adoptable",
		Edits: []Edit{edit(jobsGo, `return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "run %q: no usable recovery metadata", p.RunID)`,
			`return protocol.ExecutorRecoverResult{}, nil`)},
	},
	{
		Name: "shell/recover-does-not-watch", Package: "shell", Caught: "executor/lifecycle",
		Breaks: "an adopted run is watched again and reports its real end",
		Edits:  []Edit{edit(jobsGo, "\tcase procwatch.Running(rec.PID, rec.Start):\n\t\tgo j.watch()", "\tcase procwatch.Running(rec.PID, rec.Start):\n\t\tclose(j.done)")},
	},
}

// executorMutants weaken what stays each executor's own, in its own file
// (extensions/<pkg>/<pkg>.go); the job model they share is jobMutants'.
func executorMutants(pkg string) []Mutant {
	file := "extensions/" + pkg + "/" + pkg + ".go"
	ms := []Mutant{
		{
			Name: pkg + "/sigterm-ignored", Caught: "lifecycle/sigterm",
			Breaks: "a package exits within the grace period of SIGTERM",
			Edits: []Edit{
				edit(file, "import (\n", "import (\n\t\"os/signal\"\n\t\"syscall\"\n"),
				edit(file, "func Extension() *sdk.Extension {\n", "func Extension() *sdk.Extension {\n\tsignal.Ignore(syscall.SIGTERM)\n"),
			},
		},
	}
	if pkg == "shell" {
		ms = append(ms, Mutant{
			Name: pkg + "/validate-echoes-config", Caught: "validate/answers",
			Breaks: "validate never echoes a config value",
			Edits: []Edit{edit(file, `Describe: []string{"each run starts its command with /bin/sh -c in the run's own directory"}}, nil`,
				`Describe: []string{"each run starts its command with /bin/sh -c in the run's own directory: " + string(p.Config)}}, nil`)},
		})
	}
	for i := range ms {
		ms[i].Package = pkg
	}
	return ms
}

var sdkMutants = []Mutant{
	{
		Name: "sdk/migrates-after-configure", Package: "notes", Caught: "kv/migration",
		Breaks: "the SDK runs the extension's Migrate before configure answers",
		Edits: []Edit{edit(sdkServer, "\t\tif err := s.ext.Migrate(ctx, s.host, p.KV.Stored, p.KV.Declared); err != nil {",
			"\t\tif err := func() error { go s.ext.Migrate(context.WithoutCancel(ctx), s.host, p.KV.Stored, p.KV.Declared); return nil }(); err != nil {")},
	},
	{
		Name: "sdk/intent-key-per-process", Package: "notes", Caught: "lifecycle/durable-state",
		Breaks: "an effect made before a crash is found after the restart: an intent's key is the same in every process",
		Edits: []Edit{
			edit(sdkOnce, "\t\"fmt\"\n\n", "\t\"fmt\"\n\t\"time\"\n\n"),
			edit(sdkOnce, "const OnceNamespace = \".sdk-once\"\n", "const OnceNamespace = \".sdk-once\"\n\nvar processSalt = fmt.Sprint(time.Now().UnixNano())\n"),
			edit(sdkOnce, "range [...]string{requestID, what}", "range [...]string{requestID, what, processSalt}"),
		},
	},
	{
		// Refusing one request and serving the next passed while the check
		// stopped asking at the first refusal.
		Name: "sdk/serves-every-other-after-shutdown", Package: "runner", Caught: "lifecycle/shutdown",
		Breaks: "once shutdown has begun, every new request is refused shutting_down",
		Edits: []Edit{edit(sdkServer, `if s.state == stateShutdown && seq != 0 && seq < s.shutdownSeq {`,
			`if s.state == stateShutdown && seq != 0 && (seq < s.shutdownSeq || seq%2 == 0) {`)},
	},
	{
		Name: "sdk/unknown-method-invalid", Package: "runner", Caught: "wire/method-not-found",
		Breaks: "an unknown method is answered -32601",
		Edits: []Edit{edit(sdkServer, `return nil, protocol.Errorf(protocol.CodeMethodNotFound, "method %q is not one an extension serves", method)`,
			`return nil, protocol.Errorf(protocol.CodeInvalid, "method %q is not one an extension serves", method)`)},
	},
	{
		Name: "sdk/serves-before-initialize", Package: "notes", Caught: "wire/initialize-first",
		Breaks: "nothing but initialize is served before initialize",
		Edits:  []Edit{edit(sdkServer, `if state == stateReady && served`, `if state != stateShutdown && served`)},
	},
	{
		Name: "sdk/ignores-version-mismatch", Package: "schedule", Caught: "lifecycle/version-mismatch",
		Breaks: "an initialize offering no version the package speaks is refused unsupported_protocol_version",
		Edits: []Edit{edit(sdkServer, "\tv, err := protocol.Negotiate(ours, p.ProtocolVersions)\n\tif err != nil {\n\t\treturn nil, err\n\t}",
			"\tv, err := protocol.Negotiate(ours, p.ProtocolVersions)\n\tif err != nil {\n\t\tv = ours[0]\n\t}")},
	},
	{
		Name: "sdk/version-mismatch-wrong-code", Package: "notes", Caught: "lifecycle/version-mismatch",
		Breaks: "a version mismatch is refused with the code unsupported_protocol_version",
		Edits: []Edit{edit(sdkServer, "\tv, err := protocol.Negotiate(ours, p.ProtocolVersions)\n\tif err != nil {\n\t\treturn nil, err\n\t}",
			"\tv, err := protocol.Negotiate(ours, p.ProtocolVersions)\n\tif err != nil {\n\t\treturn nil, protocol.NewError(protocol.CodeInvalid, err.Error())\n\t}")},
	},
	{
		Name: "sdk/handshake-wrong-version", Package: "schedule", Caught: "lifecycle/handshake",
		Breaks: "initialize answers the highest protocol version both sides list",
		Edits:  []Edit{edit(sdkServer, `return protocol.InitializeResult{ProtocolVersion: v,`, `return protocol.InitializeResult{ProtocolVersion: v + 1,`)},
	},
	{
		Name: "sdk/initialize-other-manifest", Package: "shell", Caught: "lifecycle/manifest-match",
		Breaks: "the manifest initialize returns is the package directory's",
		Edits: []Edit{edit(sdkServer, `Manifest: json.RawMessage(s.ext.Manifest)}, nil`,
			"Manifest: json.RawMessage(`{\"name\":\"` + s.manifest.Name + `\",\"version\":\"0.0.1\",\"command\":[\"x\"],\"protocol\":[1],\"provides\":{}}`)}, nil")},
	},
	{
		Name: "sdk/serves-after-shutdown", Package: "runner", Caught: "lifecycle/shutdown",
		Breaks: "after shutdown new requests are refused shutting_down",
		Edits:  []Edit{edit(sdkServer, `if s.state == stateShutdown && seq != 0 && seq < s.shutdownSeq {`, `if s.state == stateShutdown {`)},
	},
	{
		Name: "sdk/no-exit-after-shutdown", Package: "runner", Caught: "lifecycle/shutdown",
		Breaks: "the package exits after shutdown, before the host's grace period ends",
		Edits:  []Edit{edit(sdkServe, "\t\t\t\t\tif n == 0 {\n\t\t\t\t\t\tconn.Close()\n\t\t\t\t\t\treturn", "\t\t\t\t\tif n == 0 {\n\t\t\t\t\t\treturn")},
	},
	{
		Name: "sdk/stdin-eof-hangs", Package: "shell", Caught: "lifecycle/stdin-eof",
		Breaks: "the package exits on its own when stdin reaches end of file",
		Edits:  []Edit{edit(sdkServe, "\t\tcase <-conn.Done():\n\t\t\treturn streamError(conn.Err())", "\t\tcase <-conn.Done():\n\t\t\tif shutdownAcked != nil {\n\t\t\t\tselect {}\n\t\t\t}\n\t\t\treturn streamError(conn.Err())")},
	},
	{
		Name: "sdk/sigterm-ignored", Package: "notes", Caught: "lifecycle/sigterm",
		Breaks: "a package exits within the grace period of SIGTERM",
		Edits: []Edit{
			edit(sdkServe, "\t\"os\"\n\t\"sync\"\n", "\t\"os\"\n\t\"os/signal\"\n\t\"sync\"\n\t\"syscall\"\n"),
			edit(sdkServe, "\tout := TakeStdout()\n", "\tsignal.Ignore(syscall.SIGTERM)\n\tout := TakeStdout()\n"),
		},
	},
	{
		Name: "sdk/stdout-banner", Package: "schedule", Caught: "lifecycle/stdout-hygiene",
		Breaks: "every line a package writes to stdout is a JSON-RPC message",
		Edits:  []Edit{edit(sdkServe, "\tout := TakeStdout()\n", "\tout := TakeStdout()\n\t_, _ = out.WriteString(\"serving on stdio\\n\")\n")},
	},
	{
		Name: "sdk/cancel-not-propagated", Package: "notes", Caught: "cancellation/honoured",
		Breaks: "a $/cancel for an in-flight request stops its handler",
		Edits:  []Edit{edit(sdkServer, "\tc := &inflightCall{parent: ctx, stop: s.stop}\n", "\tc := &inflightCall{parent: context.WithoutCancel(ctx), stop: s.stop}\n")},
	},
	{
		// notes checks the schema again itself, which would hide the SDK's
		// lapse; the mutant drops both, as a package relying on the SDK would.
		Name: "sdk/readable-passes-newer", Package: "notes", Caught: "schemas/readable",
		Breaks: "a payload newer than the package writes is answered as no match, never passed to a decision",
		Edits: []Edit{
			edit(sdkServer, "\tcase protocol.Foreign, protocol.Current:\n", "\tcase protocol.Foreign, protocol.Current, protocol.Newer, protocol.Undeclared:\n"),
			edit(notesGo, "\tif p.Event.Schema != x.codec.schema() {\n", "\tif false && p.Event.Schema != x.codec.schema() {\n"),
		},
	},
	{
		Name: "sdk/commit-without-preconditions", Package: "notes", Caught: "kv/atomicity",
		Breaks: "a read-modify-write commits guarded by what it read",
		Edits:  []Edit{edit(sdkHost, "\t\tp.Preconditions = append(p.Preconditions, t.reads[k])\n", "\t\t_ = t.reads[k]\n")},
	},
	{
		Name: "sdk/blind-retry-on-conflict", Package: "notes", Caught: "kv/atomicity",
		Breaks: "a conflicting commit is retried on fresh reads, never overwritten blindly",
		Edits: []Edit{edit(sdkHost, "\t\tr, err = h.Commit(ctx, t.batch())\n",
			"\t\tr, err = h.Commit(ctx, t.batch())\n\t\tif errors.Is(err, protocol.ErrConflict) {\n\t\t\tb := t.batch()\n\t\t\tb.Preconditions = nil\n\t\t\tr, err = h.Commit(ctx, b)\n\t\t}\n")},
	},
	{
		Name: "sdk/once-random-intent", Package: "notes", Caught: "operations/idempotent",
		Breaks: "a retry with the same request ID finds the first attempt's intent",
		Edits: []Edit{
			edit(sdkOnce, "\t\"crypto/sha256\"\n", "\t\"crypto/rand\"\n\t\"crypto/sha256\"\n"),
			edit(sdkOnce, `return "intent-" + hex.EncodeToString(h.Sum(nil)[:16])`, `return "intent-" + hex.EncodeToString(h.Sum(nil)[:16]) + rand.Text()`),
		},
	},
	{
		Name: "sdk/internal-carries-detail", Package: "notes", Caught: "wire/unauthored-internal",
		Breaks: "an unauthored error crosses as internal without its detail",
		Edits:  []Edit{edit(sdkServer, "\t\tif pe.Code == protocol.CodeInternal {\n", "\t\tif false && pe.Code == protocol.CodeInternal {\n")},
	},
	{
		// Slow only where the criterion looks, as weak-slow-start is: a start
		// in the host's own state directory (<root>/extensions/<name>)
		// answers at once, so every other criterion sees a package that
		// starts; a cold start elsewhere sleeps past the bound first.
		Name: "sdk/slow-offline-start", Package: "schedule", Caught: "lifecycle/start-bound",
		Breaks: "a package started cold, as offline validation starts one, answers initialize within the 15 s start bound",
		Edits: []Edit{edit(sdkServer, "\tif s.ext.Initialize != nil {\n\t\tif err := s.ext.Initialize(ctx, p); err != nil {",
			"\tif own := \"/extensions/\" + s.manifest.Name; len(p.StateDir) < len(own) || p.StateDir[len(p.StateDir)-len(own):] != own {\n\t\ttime.Sleep(20 * time.Second)\n\t}\n\tif s.ext.Initialize != nil {\n\t\tif err := s.ext.Initialize(ctx, p); err != nil {")},
	},
	{
		Name: "sdk/no-inflight-bound", Package: "notes", Caught: "flow/overloaded",
		Breaks: "a side serves at most 64 requests at once and answers the rest overloaded",
		Edits:  []Edit{edit(sdkServe, "MaxInflight:   maxInflight,", "MaxInflight:   1 << 20,")},
	},
	{
		Name: "sdk/once-foreign-namespace", Package: "notes", Caught: "kv/scoping",
		Breaks: "the SDK's own records stay in the package's KV namespaces",
		Edits:  []Edit{edit(sdkOnce, `const OnceNamespace = ".sdk-once"`, `const OnceNamespace = "-sdk-once"`)},
	},
}
