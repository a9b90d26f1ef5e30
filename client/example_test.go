package client_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/open-conduit/open-conduit/client"
)

// A program waits for a condition on the daemon's change stream instead of
// polling: here, for the first Work of a scope to end.
func ExampleClient_WaitFor() {
	c := client.New(filepath.Join("/home/me/.local/state/open-conduit", client.SocketName))
	defer c.Close()
	ctx := context.Background()

	// Any page names the change log's last change as of its read: wait
	// for what happens after it.
	page, err := c.Events(ctx, client.EventQuery{Scope: "home", Limit: 1})
	if err != nil {
		fmt.Println(err) // client.ErrUnavailable when no daemon runs there
		return
	}
	ended, err := c.WaitFor(ctx, client.ChangeQuery{After: page.LatestChange, Scope: "home"}, func(ch client.Change) bool {
		return ch.Work != nil && (ch.Work.State == client.WorkDone || ch.Work.State == client.WorkFailed)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("work", ended.Work.ID, "ended", ended.Work.State)
}
