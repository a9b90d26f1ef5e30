package jsonrpc

import (
	"context"
	"errors"
	"fmt"
)

// Outgoing is a request encoded ahead of being sent, so that a caller
// with one request in flight can do the encoding while it waits for the
// answer before it and then pay only for the write (the SDK's
// ArtifactWriter: a chunk is sent only once the one before it was
// acknowledged, but its base64 and strict check need not wait). Its
// memory is kept from one Prepare to the next. An Outgoing is not safe for
// concurrent use.
type Outgoing struct {
	c      *Conn
	method string
	id     int64
	msg    []byte
	ready  bool
}

var errNotPrepared = errors.New("jsonrpc: Send of an Outgoing not prepared, or sent already")

// Prepare encodes a request to method with params into o, as Call
// encodes it (the same strict check and bound, the same errors), without
// sending it.
func (c *Conn) Prepare(o *Outgoing, method string, params any) error {
	o.ready = false
	// The id is taken now: ids are unique per sender, not ordered.
	o.id = c.nextID.Add(1)
	b, err := appendMessage(o.msg[:0], o.id, false, method, params)
	o.msg = b[:0]
	if err != nil {
		return fmt.Errorf("jsonrpc: encoding params of %s: %w", method, err)
	}
	if err := c.checkSize(method, b); err != nil {
		return err
	}
	o.c, o.method, o.msg, o.ready = c, method, b, true
	return nil
}

// Send writes the prepared request and returns without waiting for its
// answer, which Pending.Wait then gives. It fails as Call fails before
// its request is sent (ctx ended, the stream broke), and then nothing was
// sent. Each Prepare allows one Send.
func (o *Outgoing) Send(ctx context.Context) (*Pending, error) {
	if !o.ready {
		return nil, errNotPrepared
	}
	o.ready = false
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := o.c
	id, b := o.id, o.msg
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	// The answer can only be read once the reading passed on (registered
	// first, as Call does).
	c.ReleaseReader()
	if err := c.write(b); err != nil {
		c.forget(id)
		return nil, err
	}
	return &Pending{c: c, ctx: ctx, method: o.method, id: id, ch: ch}, nil
}

// Pending is a request sent by Outgoing.Send whose answer is still to be
// read.
type Pending struct {
	c      *Conn
	ctx    context.Context
	method string
	id     int64
	ch     chan reply
}

// Wait waits for the answer and decodes it into result, as Call does:
// when the Send's ctx ends first, it sends $/cancel for the request and
// returns ctx.Err(); when the stream breaks, an error wrapping
// ErrTransport. Call it once.
func (p *Pending) Wait(result any) error {
	c := p.c
	select {
	case r := <-p.ch:
		return c.finish(p.method, r, result)
	case <-p.ctx.Done():
		c.forget(p.id)
		go c.sendCancel(p.id)
		return p.ctx.Err()
	case <-c.done:
		select {
		case r := <-p.ch:
			return c.finish(p.method, r, result)
		default:
			return c.Err()
		}
	}
}
