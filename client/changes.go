package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// maxStreamLine bounds one line of the change stream.
const maxStreamLine = 8 << 20

// ChangeStream reads the daemon's change stream. It is not safe for
// concurrent use.
type ChangeStream struct {
	body        io.ReadCloser
	sc          *bufio.Scanner
	last        int64
	lastJournal int64
}

// Changes opens the change stream after q.After. Call Next for each
// change and Close when done.
func (c *Client) Changes(ctx context.Context, q ChangeQuery) (*ChangeStream, error) {
	v := url.Values{}
	setInt(v, "after", q.After)
	setInt(v, "after_journal", q.AfterJournal)
	setString(v, "scope", q.Scope)
	resp, err := c.request(ctx, "GET", "/v1/changes", v, nil, nil)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxStreamLine)
	return &ChangeStream{body: resp.Body, sc: sc, last: q.After, lastJournal: q.AfterJournal}, nil
}

// Last is the Seq of the last change Next returned (or the query's After):
// reopen the stream after it to resume without missing any.
func (s *ChangeStream) Last() int64 { return s.last }

// LastJournal is the Journal of the last journal change Next returned (or
// the query's AfterJournal): with Last, the cursor a resume passes as
// ChangeQuery.AfterJournal to repeat none.
func (s *ChangeStream) LastJournal() int64 { return s.lastJournal }

// Close ends the stream.
func (s *ChangeStream) Close() error { return s.body.Close() }

// Next blocks for the next change. It returns io.EOF when the daemon ended
// the stream and the context's error when ctx (of Changes) ends.
func (s *ChangeStream) Next() (Change, error) {
	var id, data string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if data == "" {
				id = ""
				continue // a comment block or a keep-alive
			}
			var c Change
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				return Change{}, Errorf(CodeInternal, "change stream: an entry does not decode: %v", err)
			}
			if id != "" && id != changeID(c) {
				return Change{}, Errorf(CodeInternal, "change stream: entry id %q names another change than %s", id, changeID(c))
			}
			switch {
			case c.Journal < 0:
				return Change{}, Errorf(CodeInternal, "change stream: journal %d is negative", c.Journal)
			case c.Journal > 0 && (c.Journal <= s.lastJournal || c.Seq < s.last):
				return Change{}, Errorf(CodeInternal, "change stream: journal change %s after %d.%d is out of order", changeID(c), s.last, s.lastJournal)
			case c.Journal > 0:
				s.last, s.lastJournal = c.Seq, c.Journal
			case c.Seq <= s.last:
				return Change{}, Errorf(CodeInternal, "change stream: seq %d after %d is out of order", c.Seq, s.last)
			default:
				s.last = c.Seq
			}
			return c, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if data != "" {
				data += "\n"
			}
			data += d
		}
		// "event:" names the kind, which data repeats.
	}
	if err := s.sc.Err(); err != nil {
		return Change{}, err
	}
	return Change{}, io.EOF
}

// WaitFor reads the change stream after after until cond holds for a
// change, and returns that change. A dropped connection is resumed from the
// last change seen (up to a few times in a row without progress), so no
// change is missed. It returns ctx's error when ctx ends first.
func (c *Client) WaitFor(ctx context.Context, q ChangeQuery, cond func(Change) bool) (Change, error) {
	const maxResumes = 3
	resumes := 0
	for {
		stream, err := c.Changes(ctx, q)
		if err != nil {
			return Change{}, err
		}
		progressed := false
		for {
			ch, err := stream.Next()
			if err != nil {
				stream.Close()
				if ctx.Err() != nil {
					return Change{}, ctx.Err()
				}
				var apiErr *Error
				if errors.As(err, &apiErr) {
					return Change{}, err
				}
				break
			}
			progressed = true
			if cond(ch) {
				stream.Close()
				return ch, nil
			}
		}
		q.After, q.AfterJournal = stream.Last(), stream.LastJournal()
		if progressed {
			resumes = 0
		}
		if resumes++; resumes > maxResumes {
			return Change{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("the change stream on %s kept ending (last seq %d)", c.socket, q.After)}
		}
	}
}

// changeID is a change's stream id: its Seq, and ".Journal" for a journal
// change.
func changeID(c Change) string {
	id := strconv.FormatInt(c.Seq, 10)
	if c.Journal > 0 {
		id += "." + strconv.FormatInt(c.Journal, 10)
	}
	return id
}
