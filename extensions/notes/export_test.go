package notes

import (
	"context"

	"github.com/open-conduit/open-conduit/protocol"
)

// TestInbox is one inbox receiver of release 3 whose passes a test runs
// itself.
type TestInbox struct{ in *inbox }

// NewTestInbox is a receiver of dir delivering on source through deliver
// and logging to logf.
func NewTestInbox(dir, source string,
	deliver func(context.Context, protocol.IngressDeliverParams) (protocol.IngressDeliverResult, error),
	logf func(string, ...any)) *TestInbox {
	x := &extension{codec: codec{version: 3}, layout: 2}
	return &TestInbox{in: &inbox{source: source, spec: inboxSpec{Dir: dir, Poll: DefaultInboxPoll}, drafts: x.drafts,
		deliver: deliver, logf: logf, stop: make(chan struct{}), done: make(chan struct{}), logged: map[string]string{}}}
}

// Pass runs one pass: the files acknowledged, kept for the next pass and
// refused.
func (t *TestInbox) Pass(ctx context.Context) (acknowledged, kept, refused []string) {
	p := t.in.pass(ctx)
	return p.Acknowledged, p.Kept, p.Refused
}
