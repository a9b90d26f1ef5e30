package schedule

import (
	"context"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/protocol"
)

// validate checks an entry's, a route's or a connection's config before
// the host applies a configuration, by the rules configure and
// route.match apply. A refusal names the field's JSON path and the rule,
// never the value; a valid entry is described one line per job.
func validate(_ context.Context, p protocol.ValidateParams) (protocol.ValidateResult, error) {
	switch p.Kind {
	case protocol.ValidateExtension:
		e, err := ParseEntry(p.Config)
		if err != nil {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "%v", err)
		}
		if len(e.Jobs) == 0 {
			return protocol.ValidateResult{Describe: []string{"no jobs"},
				Warnings: []string{"the entry lists no jobs, so it arms no timer"}}, nil
		}
		var res protocol.ValidateResult
		for _, j := range e.Jobs {
			res.Describe = append(res.Describe, fmt.Sprintf("job %s: %s (%s)", j.Name, j.Schedule, j.Timezone))
		}
		return res, nil
	case protocol.ValidateRoute:
		cfg, err := parseRouteConfig(p.Config)
		if err != nil {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "%v", err)
		}
		what := "Work for each job"
		switch {
		case cfg.Entry != "" && len(cfg.Jobs) > 0:
			what = fmt.Sprintf("Work for %d jobs of entry %s", len(cfg.Jobs), cfg.Entry)
		case cfg.Entry != "":
			what = "Work for each job of entry " + cfg.Entry
		case len(cfg.Jobs) > 0:
			what = fmt.Sprintf("Work for %d named jobs", len(cfg.Jobs))
		}
		return protocol.ValidateResult{Describe: []string{what}}, nil
	case protocol.ValidateConnection:
		// A schedule-webhook connection is its token alone.
		if len(p.Config) > 0 {
			if err := protocol.DecodeStrict(p.Config, &struct{}{}); err != nil {
				return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "a %s connection takes no config: %v", ConnectionWebhook, decodeError(err))
			}
		}
		if !slices.Contains(p.SecretNames, SecretToken) {
			return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "a %s connection needs secret_refs.%s", ConnectionWebhook, SecretToken)
		}
		for _, n := range p.SecretNames {
			if n != SecretToken {
				return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "a %s connection has one secret, %s; not %q", ConnectionWebhook, SecretToken, n)
			}
		}
		return protocol.ValidateResult{Describe: []string{"the token that opens the jobs' webhooks"}}, nil
	}
	return protocol.ValidateResult{}, nil
}
