package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// kv pages one namespace of a package's KV, for tests and operators: the
// namespace must be the package's (its name, or its name and a dotted
// suffix), so the daemon's own reserved namespaces are never read here.
func (a *api) kv(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	pkg := q.Get("package")
	if pkg == "" {
		return client.Errorf(client.CodeInvalidRequest, "a KV read needs package=NAME")
	}
	if !protocol.IsIdentifier(pkg) {
		return client.Errorf(client.CodeInvalidRequest, "package=%q is not an extension name", clipForMessage(pkg))
	}
	ns := pkg
	if q.Has("namespace") {
		ns = q.Get("namespace")
	}
	if err := protocol.ValidNamespace(ns); err != nil {
		return client.Errorf(client.CodeInvalidRequest, "namespace=%q: %s", clipForMessage(ns), protocolMessage(err))
	}
	if !protocol.Namespace(pkg, ns) {
		return client.Errorf(client.CodeInvalidRequest, "namespace %q is not one of package %s's (%s or %s.<suffix>)",
			clipForMessage(ns), pkg, pkg, pkg)
	}
	limit, err := queryLimit(q)
	if err != nil {
		return err
	}
	if !a.knowsPackage(r, pkg) {
		return client.Errorf(client.CodeNotFound, "no package %q", pkg)
	}
	prefix, after := q.Get("prefix"), q.Get("after")
	page, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) ([]runtime.KVEntry, error) {
		return tx.KVList(ns, prefix, after, limit)
	})
	if err != nil {
		return err
	}
	out := client.KVPage{Package: pkg, Namespace: ns, Entries: make([]client.KVEntry, 0, len(page))}
	for _, e := range page {
		// The host stores only JSON values; anything else is a store
		// fault, not something to pass on as if it were JSON.
		if !json.Valid(e.Value) {
			return fmt.Errorf("KV %s/%q holds a value that is not JSON", ns, e.Key)
		}
		out.Entries = append(out.Entries, client.KVEntry{Key: e.Key, Value: json.RawMessage(e.Value), Version: e.Version})
	}
	if len(page) == limit {
		out.Next = page[len(page)-1].Key
	}
	return ok(w, out)
}

// knowsPackage reports whether the daemon discovered a package named pkg
// (admitted or refused), so a misspelt name is not_found rather than an
// empty page that looks like a package with no data.
func (a *api) knowsPackage(r *http.Request, pkg string) bool {
	for _, p := range a.b.Status(r.Context()).Packages {
		if p.Name == pkg {
			return true
		}
	}
	return false
}

// protocolMessage is a protocol refusal's message without its code.
func protocolMessage(err error) string {
	var e *protocol.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
