package certify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

// CriteriaVersion versions the criteria. It goes up by one whenever a
// criterion is added or tightened, so a report says which rules it holds a
// package to.
const CriteriaVersion = 2

// Criterion is one certification rule, run against one package.
type Criterion struct {
	// ID is stable and hierarchical ("lifecycle/handshake"): reports,
	// baselines and --run match on it.
	ID string
	// Title names the criterion in a few words.
	Title string
	// Checks says what the criterion checks, in a sentence.
	Checks string
	// Section is the section of the extension protocol it enforces.
	Section string
	// Applies decides from the manifest whether the criterion applies; when
	// it does not, the reason says what the manifest lacks. nil applies to
	// every package.
	Applies func(m *protocol.Manifest) (ok bool, reason string)
	// Check is the conformance package check the criterion runs against
	// the running package (a conformance.CheckPackageX core): nil for a
	// pass, an error wrapping ErrNotApplicable for a skip, any other error
	// for a failure. Adding a criterion is adding its entry with its Check.
	Check func(ctx context.Context, d conformance.PackageDriver) error
	// Run, for a criterion the runner decides itself (manifest/valid),
	// checks the target instead of Check: nil for a pass, an error
	// wrapping ErrHarness when the runner broke, any other error for a
	// failure. A criterion with neither is not wired and ends as
	// harness_error, never as pass.
	Run func(ctx context.Context, t *Target) error
}

// run checks t by Run, else by Check on the target's package driver; a
// criterion with neither is a harness error (ErrNotWired).
func (c Criterion) run(ctx context.Context, t *Target) error {
	switch {
	case c.Run != nil:
		return c.Run(ctx, t)
	case c.Check != nil:
		return runCheck(ctx, t, c.Check)
	}
	return notWired(c.ID)
}

// applies reports whether c applies to m.
func (c Criterion) applies(m *protocol.Manifest) (bool, string) {
	if c.Applies == nil {
		return true, ""
	}
	return c.Applies(m)
}

// Criteria returns every criterion of this CriteriaVersion, sorted by ID.
func Criteria() []Criterion { return slices.Clone(criteria) }

// Lookup returns the criterion with the given ID.
func Lookup(id string) (Criterion, bool) {
	i, ok := slices.BinarySearchFunc(criteria, id, func(c Criterion, id string) int { return strings.Compare(c.ID, id) })
	if !ok {
		return Criterion{}, false
	}
	return criteria[i], true
}

// checkCriteria refuses a set of criteria a run cannot report honestly: an
// ID that is empty or repeated, or a criterion with both a Run and a Check
// (which one decides would be unclear). One with neither runs, and ends as
// harness_error.
func checkCriteria(cs []Criterion) error {
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		switch {
		case c.ID == "":
			return usagef("a criterion has no ID")
		case seen[c.ID]:
			return usagef("criterion %s is defined twice", c.ID)
		case c.Run != nil && c.Check != nil:
			return usagef("criterion %s has both a Run and a Check", c.ID)
		}
		seen[c.ID] = true
	}
	return nil
}

// runCheck runs one package check against the target's package, which the
// launcher must make a conformance.PackageDriver (HostLaunch does).
func runCheck(ctx context.Context, t *Target, check func(context.Context, conformance.PackageDriver) error) error {
	p, err := t.Package(ctx)
	if err != nil {
		return err
	}
	d, ok := p.(conformance.PackageDriver)
	if !ok {
		return &harnessError{err: fmt.Errorf("the package launcher gives no conformance driver (%T): use HostLaunch", p), notWired: true}
	}
	return check(ctx, d)
}

// notWired is the harness error of a criterion that has no check.
func notWired(id string) error {
	return &harnessError{err: fmt.Errorf("criterion %s has no check wired into certify", id), notWired: true}
}

// The spec sections criteria enforce.
const (
	sectionManifest     = "Manifest"
	sectionDecisions    = "Decision summary (Version, Manifest)"
	sectionWire         = "Wire format"
	sectionLifecycle    = "Lifecycle"
	sectionCancellation = "Cancellation"
	sectionTransactions = "Transactions and in-transaction calls"
	sectionCrash        = "Crash and reconnect"
	sectionOperations   = "Operation handlers and request IDs"
	sectionScoping      = "Authority and scoping"
	sectionControls     = "Public executor controls"
	sectionExecutors    = "Executors across extension restarts"
	sectionSchemas      = "Event payload schema evolution"
	sectionRouteTraces  = "Route traces"
	sectionDisplay      = "Work display and wait descriptions"
	sectionDoctor       = "Doctor checks"
	sectionIngress      = "Inventory of shipped interactions (ingress reconcile)"
	sectionPermissions  = "Permissions"
	sectionFlow         = "Flow control"
	sectionOffline      = "Doctor checks (offline validation)"
	sectionKVLayout     = "Extension KV layout"
)

// criteria is the registry, sorted by ID (a test keeps it so).
var criteria = []Criterion{
	{
		ID:      "cancellation/honoured",
		Title:   "Cancellation honoured",
		Checks:  "a $/cancel for an in-flight request stops its handler: with its call to the host held unanswered, the package cancels that call or answers cancelled (-32800) within 5 s, and in the 250 ms after it makes no other host call and gives no other answer; a cancelled executor.wait is answered cancelled or never; the package keeps serving",
		Section: sectionCancellation,
		Applies: declares("the manifest declares no operation and no executor", func(m *protocol.Manifest) bool {
			return len(m.Provides.Operations) > 0 || len(m.Provides.Executors) > 0
		}),
		Check: conformance.CheckPackageCancellation,
	},
	{
		ID:      "checks/shape",
		Title:   "Doctor checks answer a known shape",
		Checks:  "check.run answers {ok, detail} or a full check whose status is ok, info, warn or fail and whose code matches [a-z][a-z0-9_]*, never a mix of the two",
		Section: sectionDoctor,
		Applies: declares("the manifest declares no doctor check", func(m *protocol.Manifest) bool { return len(m.Provides.Checks) > 0 }),
		Check:   conformance.CheckPackageChecks,
	},
	{
		ID:      "emissions/atomic",
		Title:   "Emissions atomic with their records",
		Checks:  "an emit operation writes its records only inside the emission's transaction: planning it (operation.emit) writes nothing, and emit.commit answers the records, in the package's own namespaces, without calling the host",
		Section: sectionTransactions,
		Applies: declaresFamilies,
		Check:   conformance.CheckPackageEmissionsAtomic,
	},
	{
		ID:      "emissions/idempotent",
		Title:   "Emissions idempotent by emitted ID",
		Checks:  "the same request ID (operation.emit) or the same delivery (ingress.push) names the same Events again, by source and delivery ID, so the host accepts each once",
		Section: sectionTransactions,
		Applies: declaresFamilies,
		Check:   conformance.CheckPackageEmissionsIdempotent,
	},
	{
		ID:      "executor/controls",
		Title:   "Declared executor controls",
		Checks:  "each control and label method an executor declares (stop, forget, attach, container_attach, live, interactive_launch, interrupt, inject, resume) answers as specified",
		Section: sectionControls,
		Applies: func(m *protocol.Manifest) (bool, string) {
			if len(m.Provides.Executors) == 0 {
				return false, "the manifest declares no executor"
			}
			for _, e := range m.Provides.Executors {
				c, l := e.Controls, e.Labels
				if c.Stop || c.Forget || c.Attach || c.ContainerAttach || c.Live || c.InteractiveLaunch ||
					l.Interrupt || l.Inject || l.Resume {
					return true, ""
				}
			}
			return false, "no executor declares a control"
		},
		Check: conformance.CheckPackageExecutorControls,
	},
	{
		ID:      "executor/lifecycle",
		Title:   "Executor run, wait and recover",
		Checks:  "an executor starts a run, reports its end through wait, and after a package restart adopts the run again through recover with its persisted metadata",
		Section: sectionExecutors,
		Applies: declares("the manifest declares no executor", func(m *protocol.Manifest) bool { return len(m.Provides.Executors) > 0 }),
		Check:   conformance.CheckPackageExecutorLifecycle,
	},
	{
		ID:      "flow/overloaded",
		Title:   "Overloaded over 64 in flight, reader never paused",
		Checks:  "with 64 requests of one the package serves held in flight (an operation, task or check whose handler calls the host, its host calls held unanswered), 4 more are each answered overloaded at once without a call to the host; then, the bound still full, one held host call is answered and its request completes, so the reader was never paused",
		Section: sectionFlow,
		Applies: declares("the manifest declares no operation, task or check, so no request certification makes can be held in flight", declaresDriven),
		Check:   conformance.CheckPackageOverloaded,
	},
	{
		ID:      "ingress/stable-scan",
		Title:   "Reconcile scans stable and honest",
		Checks:  "with every declared surface exercised and certification's deliveries pushed (again, under fresh IDs, while a source has fewer than two items), two scans of each reconciled source, one item a page, see the same items with the same (item, version) and Event delivery identity, and no page that names a next page claims the scan complete",
		Section: sectionIngress,
		Applies: declares("the manifest declares no ingress type", func(m *protocol.Manifest) bool {
			return slices.ContainsFunc(m.Provides.Extensions, func(x protocol.ExtensionDecl) bool { return x.Ingress })
		}),
		Check: conformance.CheckPackageIngressScan,
	},
	{
		ID:      "kv/atomicity",
		Title:   "KV atomicity",
		Checks:  "under contending calls (configure, and each handler operation twice at once) with the host refusing a precondition-guarded kv.commit as a conflict, the package reads again or guards the batch before it commits to the same keys, never overwriting blindly; and, each handler operation called once at a time, every commit carries a precondition on each key it writes that it read since its previous commit",
		Section: sectionTransactions,
		Applies: declaresHandler,
		Check:   conformance.CheckPackageKVAtomicity,
	},
	{
		ID:      "kv/migration",
		Title:   "KV migration before configure, idempotent",
		Checks:  "with each older KV layout the author seeds (certify/inputs.json kv_layouts) served as its KV and configure carrying kv.stored < kv.declared, the package migrates with precondition-guarded batches before it answers configure, leaves the layout the author names, writes nothing when the same migration runs again on a new process, and serves its handler operations on the migrated KV",
		Section: sectionKVLayout,
		Applies: declares("the manifest declares no KV migration (kv_version 0, no older layout to migrate from)", func(m *protocol.Manifest) bool { return m.KVVersion > 0 }),
		Check:   conformance.CheckPackageKVMigration,
	},
	{
		ID:      "kv/scoping",
		Title:   "KV scoping",
		Checks:  "the package reads and writes only its own KV namespaces (its name, or name. plus a suffix); a foreign namespace is refused and never attempted",
		Section: sectionScoping,
		Check:   conformance.CheckPackageKVScoping,
	},
	{
		ID:      "lifecycle/crash-restart",
		Title:   "Crash, restart, configure again",
		Checks:  "after the process is killed (SIGKILL), the host restarts it, and the new process completes initialize and configure again and serves as before",
		Section: sectionCrash,
		Check:   conformance.CheckPackageCrashRestart,
	},
	{
		ID:      "lifecycle/durable-state",
		Title:   "Durable state survives a crash",
		Checks:  "a handler operation's effect made before the package's process group is killed (SIGKILL) is there after the host restarts it: the same call, retried with its request ID, answers as before and makes no write",
		Section: sectionCrash,
		Applies: declaresHandler,
		Check:   conformance.CheckPackageDurableState,
	},
	{
		ID:      "lifecycle/handshake",
		Title:   "Handshake and version negotiation",
		Checks:  "initialize answers the highest protocol version both sides list, before any other method is valid, and configure is accepted after it",
		Section: sectionLifecycle,
		Check:   conformance.CheckPackageHandshake,
	},
	{
		ID:      "lifecycle/manifest-match",
		Title:   "Manifest match",
		Checks:  "the manifest initialize returns is the manifest in the package directory",
		Section: sectionDecisions,
		Check:   conformance.CheckPackageManifestMatch,
	},
	{
		ID:      "lifecycle/shutdown",
		Title:   "Shutdown",
		Checks:  "after shutdown the package answers new requests shutting_down, finishes or cancels in-flight work, and exits before the host's grace period ends; with an executor.wait in flight on a run certification holds open, requests sent one after another are judged by their order on the wire: only the first one written after shutdown may race its start and be served, none written after the package answered another or answered shutdown",
		Section: sectionLifecycle,
		Check:   conformance.CheckPackageShutdown,
	},
	{
		ID:      "lifecycle/sigterm",
		Title:   "Exit on SIGTERM",
		Checks:  "after its handshake the package exits within 5 s of SIGTERM, which the host sends once shutdown's grace has passed",
		Section: sectionLifecycle,
		Check:   conformance.CheckPackageSigterm,
	},
	{
		ID:      "lifecycle/start-bound",
		Title:   "Initialize within the 15 s start bound",
		Checks:  "a spare process started cold, as offline validation starts one (a fresh temporary state directory), answers initialize within 15 s of its launch; it is killed at the bound",
		Section: sectionOffline,
		Check:   conformance.CheckPackageStartBound,
	},
	{
		ID:      "lifecycle/stdin-eof",
		Title:   "Exit on stdin EOF",
		Checks:  "the package exits on its own when its stdin reaches EOF, so a crashed host leaves no orphan",
		Section: sectionLifecycle,
		Check:   conformance.CheckPackageStdinEOF,
	},
	{
		ID:      "lifecycle/stdout-hygiene",
		Title:   "Stdout hygiene",
		Checks:  "every line the package writes to stdout is a JSON-RPC message; the first line that is not is reported, cut to 200 bytes",
		Section: sectionWire,
		Check:   conformance.CheckPackageStdoutHygiene,
	},
	{
		ID:      "lifecycle/version-mismatch",
		Title:   "Version mismatch refused",
		Checks:  "an initialize offering no version the package speaks is refused with unsupported_protocol_version, the same way every time, before any other call",
		Section: sectionDecisions,
		Check:   conformance.CheckPackageVersionMismatch,
	},
	{
		ID:      "manifest/valid",
		Title:   "Manifest validity",
		Checks:  "the package directory's manifest parses strictly and keeps every manifest rule of this build",
		Section: sectionManifest,
		Run:     checkManifest,
	},
	{
		ID:      "operations/idempotent",
		Title:   "Operations idempotent on request ID",
		Checks:  "a handler operation called again with the same request ID makes its effect once; an operation that refuses every input certification has (certify/inputs.json or built from its schema) could not be exercised and fails",
		Section: sectionOperations,
		Applies: declaresHandler,
		Check:   conformance.CheckPackageOperationsIdempotent,
	},
	{
		ID:      "permissions/declared",
		Title:   "Only enabled host methods called",
		Checks:  "over the whole run so far, with every declared surface exercised, the package never calls a host method its manifest does not enable (no call the host answers undeclared)",
		Section: sectionPermissions,
		Check:   conformance.CheckPackagePermissions,
	},
	{
		ID:      "routes/display",
		Title:   "Route display within limits",
		Checks:  "each route decision's display, for certification's Events, for the same Events with long and multi-line strings in their payloads and for them with their links turned to javascript:, data: and file: URLs, keeps the display limits (one line per field; title 200, ref 40, requester 100, label 60 and URL 2048 bytes; at most 8 links) and links only to http or https URLs",
		Section: sectionDisplay,
		Applies: func(m *protocol.Manifest) (bool, string) {
			if len(m.Provides.Routes) == 0 {
				return false, "the manifest declares no route handler"
			}
			for _, r := range m.Provides.Routes {
				if r.Display {
					return true, ""
				}
			}
			return false, "no route handler declares a display"
		},
		Check: conformance.CheckPackageRoutesDisplay,
	},
	{
		ID:      "routes/pure",
		Title:   "Route decisions pure",
		Checks:  "route.match decides from its input alone: asked again, it answers the same and records, sends or changes nothing",
		Section: sectionRouteTraces,
		Applies: declares("the manifest declares no route handler", func(m *protocol.Manifest) bool { return len(m.Provides.Routes) > 0 }),
		Check:   conformance.CheckPackageRoutesPure,
	},
	{
		ID:      "routes/samples",
		Title:   "Route samples writable",
		Checks:  "route.samples offers samples whose payloads the package may write, timed by the host's clock, without side effects",
		Section: sectionRouteTraces,
		Applies: func(m *protocol.Manifest) (bool, string) {
			if len(m.Provides.Routes) == 0 {
				return false, "the manifest declares no route handler"
			}
			for _, r := range m.Provides.Routes {
				if r.Samples {
					return true, ""
				}
			}
			return false, "no route handler declares samples"
		},
		Check: conformance.CheckPackageRouteSamples,
	},
	{
		ID:      "schemas/current-version",
		Title:   "Payloads written at the current version",
		Checks:  "every payload the package writes carries no schema or the current (last declared) version of one of its own schema bases",
		Section: sectionSchemas,
		Applies: declares("the manifest declares no payload schema", func(m *protocol.Manifest) bool { return len(m.Provides.Schemas) > 0 }),
		Check:   conformance.CheckPackageSchemasCurrent,
	},
	{
		ID:      "schemas/readable",
		Title:   "Unreadable payloads are no match",
		Checks:  "route.match answers an Event whose own payload is newer than the package writes, retired or undeclared as no match, and reads the author's older listed payloads (certify/inputs.json) through their upcast without refusing them",
		Section: sectionSchemas,
		Applies: func(m *protocol.Manifest) (bool, string) {
			if len(m.Provides.Routes) == 0 {
				return false, "the manifest declares no route handler"
			}
			if ok, _ := declaresFamilies(m); !ok {
				return false, "the manifest declares no event family"
			}
			return true, ""
		},
		Check: conformance.CheckPackageSchemasReadable,
	},
	{
		ID:      "tasks/interval",
		Title:   "Tasks finish within their interval",
		Checks:  "task.run of each declared task answers within the task's interval, before the host's next run of it is due",
		Section: sectionLifecycle,
		Applies: declares("the manifest declares no task", func(m *protocol.Manifest) bool { return len(m.Provides.Tasks) > 0 }),
		Check:   conformance.CheckPackageTasks,
	},
	{
		ID:      "transactions/deadline",
		Title:   "In-transaction methods within 250 ms",
		Checks:  "recurrence.next, work_kind.trigger, dependency.filter and emit.commit answer within the 250 ms in-transaction deadline (a miss is tried again twice, as the host retries the transaction), make no callback while they run, and answer the same input the same way twice",
		Section: sectionTransactions,
		Applies: declares("the manifest declares no in-transaction method (no recurrence, work-kind trigger, dependency filter or emit commit)", declaresInTransaction),
		Check:   conformance.CheckPackageInTransactionDeadline,
	},
	{
		ID:      "validate/answers",
		Title:   "Validate answers every declared type",
		Checks:  "validate answers for each declared extension type, connection type, route (and binding) and executor; a refusal is one line that never echoes a config value, and a binding's at most 300 bytes; with a probe value planted under an unknown member and in each declared field, no description or warning copies the config's text",
		Section: sectionDoctor,
		Applies: declares("the manifest declares no type to validate (no extension type, connection type, route or executor)", func(m *protocol.Manifest) bool {
			p := m.Provides
			return len(p.Extensions)+len(p.Connections)+len(p.Routes)+len(p.Executors) > 0
		}),
		Check: conformance.CheckPackageValidate,
	},
	{
		ID:      "wait/progress",
		Title:   "Wait progress within bounds",
		Checks:  "every wait.progress the package sends, over the run with every declared surface exercised, is one line of at most 120 bytes, for a Work whose active Wait it declared",
		Section: sectionDisplay,
		Applies: declares("the manifest declares no wait operation", func(m *protocol.Manifest) bool {
			return slices.ContainsFunc(m.Provides.Operations, func(o protocol.OperationDecl) bool { return o.Kind == protocol.OperationKindWait })
		}),
		Check: conformance.CheckPackageWaitProgress,
	},
	{
		ID:      "wire/initialize-first",
		Title:   "Nothing served before initialize",
		Checks:  "before initialize, configure, validate, every host-to-extension method the manifest enables and shutdown are each refused; initialize and configure then succeed",
		Section: sectionLifecycle,
		Check:   conformance.CheckPackageInitializeFirst,
	},
	{
		ID:      "wire/malformed-closes",
		Title:   "Malformed input closes the connection",
		Checks:  "a line that is not JSON, and a request longer than 16 MiB, are each a protocol error: the package exits within 5 s of either",
		Section: sectionWire,
		Check:   conformance.CheckPackageMalformedInput,
	},
	{
		ID:      "wire/method-not-found",
		Title:   "Unknown method answered -32601",
		Checks:  "a method no catalogue holds is refused with JSON-RPC -32601 on the wire, and the package keeps serving",
		Section: sectionWire,
		Check:   conformance.CheckPackageMethodNotFound,
	},
	{
		ID:      "wire/unauthored-internal",
		Title:   "Unauthored errors cross as internal, without detail",
		Checks:  "with every host call it makes answered internal (-32603) carrying a detail unique to the request, each operation (with each input), task, check and configure the package answers with an error answers internal or its own authored code, never a transport code, and carries no trace of the detail; not applicable when no request reaches an error path",
		Section: sectionWire,
		Applies: declares("the manifest declares no operation, task or check whose failure certification could provoke", declaresDriven),
		Check:   conformance.CheckPackageUnauthoredErrors,
	},
}

// declares is an Applies that holds when has does, and otherwise gives
// reason.
func declares(reason string, has func(*protocol.Manifest) bool) func(*protocol.Manifest) (bool, string) {
	return func(m *protocol.Manifest) (bool, string) {
		if has(m) {
			return true, ""
		}
		return false, reason
	}
}

func declaresHandler(m *protocol.Manifest) (bool, string) {
	for _, o := range m.Provides.Operations {
		if o.Kind == protocol.OperationKindHandler {
			return true, ""
		}
	}
	return false, "the manifest declares no handler operation"
}

// declaresDriven holds when the package serves a request certification
// drives whose handler may call the host: an operation, a task or a check.
func declaresDriven(m *protocol.Manifest) bool {
	p := m.Provides
	return len(p.Operations)+len(p.Tasks)+len(p.Checks) > 0
}

func declaresFamilies(m *protocol.Manifest) (bool, string) {
	for _, e := range m.Provides.Extensions {
		if len(e.Families) > 0 {
			return true, ""
		}
	}
	return false, "the manifest declares no event family"
}

func declaresInTransaction(m *protocol.Manifest) bool {
	if len(m.Provides.Recurrences) > 0 {
		return true
	}
	for _, k := range m.Provides.WorkKinds {
		if k.Trigger {
			return true
		}
	}
	for _, o := range m.Provides.Operations {
		if o.DependencyFilter || o.Commit {
			return true
		}
	}
	return false
}

// checkManifest is manifest/valid: the runner loaded the manifest before
// the run, so the criterion reports what loading found.
func checkManifest(_ context.Context, t *Target) error {
	if t.Manifest != nil {
		return nil
	}
	if t.session == nil || t.session.manifestErr == nil {
		return Harnessf("the manifest was neither loaded nor refused")
	}
	return describeManifestError(t.session.manifestErr)
}

// describeManifestError lists each refusal on its own line, naming the rule
// and the field.
func describeManifestError(err error) error {
	refusals := protocol.ManifestErrors(err)
	if len(refusals) == 0 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the manifest breaks %d rule(s):", len(refusals))
	for _, r := range refusals {
		b.WriteString("\n  ")
		b.WriteString(r.Error())
	}
	return fmt.Errorf("%s", b.String())
}
