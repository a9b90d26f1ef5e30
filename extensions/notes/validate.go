package notes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/protocol"
)

// validate checks an entry's and a route's config before the host applies
// a configuration, by the rules configure and route.match apply: known
// fields only, and a digest that is a UTC time of day. A refusal names the
// field and never echoes its value.
func validate(_ context.Context, p protocol.ValidateParams) (protocol.ValidateResult, error) {
	switch p.Kind {
	case protocol.ValidateExtension:
		var cfg entryConfig
		if err := strictObject(p.Config, &cfg); err != nil {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "entry config: %v", err)
		}
		if cfg.Digest != "" {
			if _, _, err := parseTimeOfDay(cfg.Digest); err != nil {
				return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "digest is a UTC time of day, HH:MM")
			}
		}
		if _, err := parseInboxPoll(cfg.InboxPoll); err != nil {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "%v", err)
		}
		if cfg.InboxPoll != "" && cfg.InboxDir == "" {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "inbox_poll needs an inbox_dir")
		}
		res := protocol.ValidateResult{Describe: []string{"a note store"}}
		if cfg.Digest != "" {
			res.Describe = append(res.Describe, "a daily digest at "+cfg.Digest+" UTC")
		}
		if cfg.InboxDir != "" {
			res.Describe = append(res.Describe, "an inbox receiver delivering from a spool directory")
		}
		return res, nil
	case protocol.ValidateRoute:
		var cfg routeConfig
		if err := strictObject(p.Config, &cfg); err != nil {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "route config: %v", err)
		}
		return protocol.ValidateResult{Describe: []string{"Work for each note"}}, nil
	case protocol.ValidateConnection:
		// A notes-webhook connection is its secret alone.
		if err := strictObject(p.Config, &struct{}{}); err != nil {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "a %s connection takes no config: %v", ConnectionWebhook, err)
		}
		if !slices.Contains(p.SecretNames, SecretKey) {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "a %s connection needs secret_refs.%s", ConnectionWebhook, SecretKey)
		}
		for _, n := range p.SecretNames {
			if n != SecretKey {
				return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "a %s connection has one secret, %s; not %q", ConnectionWebhook, SecretKey, n)
			}
		}
		return protocol.ValidateResult{Describe: []string{"the secret that signs webhook deliveries"}}, nil
	}
	return protocol.ValidateResult{}, nil
}

// strictObject decodes a config object refusing unknown fields; naming the
// field is safe, echoing a value is not.
func strictObject(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("%s has the wrong type", ute.Field)
		}
		if msg := err.Error(); len(msg) > 0 && bytes.HasPrefix([]byte(msg), []byte("json: unknown field")) {
			return fmt.Errorf("%s", msg[len("json: "):])
		}
		return fmt.Errorf("not a JSON object of the expected form")
	}
	return nil
}
