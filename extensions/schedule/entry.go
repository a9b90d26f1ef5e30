package schedule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zones resolve the same on every machine, with or without a system zoneinfo
	"unicode"

	"github.com/robfig/cron/v3"

	"github.com/open-conduit/open-conduit/protocol"
)

// The bounds of an entry's config.
const (
	// MaxJobs is the most jobs one entry lists.
	MaxJobs = 256
	// MaxJobNameBytes bounds a job's name.
	MaxJobNameBytes = 64
	// MaxScheduleBytes bounds a job's schedule.
	MaxScheduleBytes = 256
	// MaxZoneBytes bounds a time zone's name.
	MaxZoneBytes = 64
)

// DefaultZone is the zone schedules are read in when neither the job nor
// its entry names one.
const DefaultZone = "UTC"

// EntryConfig is a schedule entry's config object.
type EntryConfig struct {
	// Timezone is the IANA zone the entry's jobs are read in unless a job
	// names its own; empty is DefaultZone.
	Timezone string `json:"timezone,omitempty"`
	// Jobs are the entry's jobs.
	Jobs []JobConfig `json:"jobs,omitempty"`
}

// JobConfig is one job of an entry.
type JobConfig struct {
	// Name names the job within its entry: lower-case letters, digits,
	// - and _, starting with a letter or digit. It is the Work's title
	// and a segment of the job's webhook path.
	Name string `json:"name"`
	// Schedule is a cron spec in robfig/cron's syntax: five fields
	// (minute hour day-of-month month day-of-week), six with a leading
	// seconds field, or a descriptor (@yearly, @monthly, @weekly, @daily,
	// @hourly, @every <duration>).
	Schedule string `json:"schedule"`
	// Timezone is the IANA zone the schedule is read in; empty is the
	// entry's.
	Timezone string `json:"timezone,omitempty"`
}

// Entry is a parsed entry config: every job's schedule ready to compute
// occurrences.
type Entry struct {
	// Timezone is the entry's zone, DefaultZone when it names none.
	Timezone string
	// Jobs are in config order.
	Jobs []Job
}

// Job is one parsed job.
type Job struct {
	// Name is the job's name.
	Name string
	// Schedule is the spec as the config wrote it.
	Schedule string
	// Timezone is the zone the spec is read in.
	Timezone string

	spec cron.Schedule
	loc  *time.Location
}

// Job returns the entry's job named name.
func (e Entry) Job(name string) (Job, bool) {
	for _, j := range e.Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return Job{}, false
}

// FieldError refuses one field of a config object: Path is its JSON path
// ("jobs[2].schedule", "timezone"), Problem what is wrong, never quoting
// the value.
type FieldError struct {
	Path    string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + ": " + e.Problem
}

// ParseEntry reads an entry's config object strictly (no unknown or
// duplicate member, types as declared) and checks every job: a name, a
// schedule robfig/cron reads that has an occurrence, a time zone that
// exists. Empty config is an entry without jobs. A refusal is a
// *FieldError naming the field's JSON path.
func ParseEntry(raw []byte) (Entry, error) {
	var cfg EntryConfig
	if len(raw) > 0 {
		if err := protocol.DecodeStrict(raw, &cfg); err != nil {
			return Entry{}, decodeError(err)
		}
	}
	entryZone := cfg.Timezone
	if entryZone == "" {
		entryZone = DefaultZone
	}
	if _, err := loadZone(entryZone); err != nil {
		return Entry{}, &FieldError{Path: "timezone", Problem: err.Error()}
	}
	if len(cfg.Jobs) > MaxJobs {
		return Entry{}, &FieldError{Path: "jobs", Problem: fmt.Sprintf("lists %d jobs, over %d", len(cfg.Jobs), MaxJobs)}
	}
	e := Entry{Timezone: entryZone}
	seen := map[string]bool{}
	for i, jc := range cfg.Jobs {
		at := fmt.Sprintf("jobs[%d]", i)
		if err := checkJobName(jc.Name); err != nil {
			return Entry{}, &FieldError{Path: at + ".name", Problem: err.Error()}
		}
		if seen[jc.Name] {
			return Entry{}, &FieldError{Path: at + ".name", Problem: "names a job an earlier one names"}
		}
		seen[jc.Name] = true
		zone := jc.Timezone
		if zone == "" {
			zone = entryZone
		}
		j, err := parseJob(jc.Name, jc.Schedule, zone)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				fe.Path = at + "." + fe.Path
			}
			return Entry{}, err
		}
		e.Jobs = append(e.Jobs, j)
	}
	return e, nil
}

// decodeError turns DecodeStrict's refusal into a FieldError in words
// for a config object rather than a manifest.
func decodeError(err error) error {
	var me *protocol.ManifestError
	if !errors.As(err, &me) {
		return &FieldError{Problem: "not a JSON object of the expected form"}
	}
	problem := me.Message
	switch me.Rule {
	case "newer.field":
		problem = "is not a field of a schedule entry"
	case "json.duplicate-key":
		problem = "appears twice"
	}
	return &FieldError{Path: me.Path, Problem: problem}
}

// checkJobName checks a job's name: it is a path segment and a key.
func checkJobName(name string) error {
	switch {
	case name == "":
		return errors.New("a job needs a name")
	case len(name) > MaxJobNameBytes:
		return fmt.Errorf("is %d bytes, over %d", len(name), MaxJobNameBytes)
	case !validJobName(name):
		return errors.New("is lower-case letters, digits, - and _, starting with a letter or digit")
	}
	return nil
}

func validJobName(name string) bool {
	if name == "" || len(name) > MaxJobNameBytes {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '-' || r == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// specParser reads robfig/cron's syntax: an optional seconds field, then
// minute, hour, day of month, month and day of week, or a descriptor.
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// occurrenceProbe is where parseJob looks for a first occurrence. Any
// schedule robfig/cron reads recurs within four years (29 February) or
// never, and its Next looks five years ahead, so one fixed instant tells
// them apart and keeps validation a pure function of the config.
var occurrenceProbe = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// parseJob parses a job's schedule in zone. Its FieldError paths are
// relative to the job ("schedule", "timezone").
func parseJob(name, spec, zone string) (Job, error) {
	loc, err := loadZone(zone)
	if err != nil {
		return Job{}, &FieldError{Path: "timezone", Problem: err.Error()}
	}
	s, err := parseSpec(spec)
	if err != nil {
		return Job{}, &FieldError{Path: "schedule", Problem: err.Error()}
	}
	j := Job{Name: name, Schedule: spec, Timezone: zone, spec: s, loc: loc}
	if j.Next(occurrenceProbe).IsZero() {
		return Job{}, &FieldError{Path: "schedule", Problem: "never occurs (a day that no month has)"}
	}
	return j, nil
}

// parseSpec reads one schedule. Its errors say what the rule is and never
// quote the spec (robfig/cron's own errors do).
func parseSpec(spec string) (cron.Schedule, error) {
	switch {
	case strings.TrimSpace(spec) == "":
		return nil, errors.New("a job needs a schedule")
	case len(spec) > MaxScheduleBytes:
		return nil, fmt.Errorf("is %d bytes, over %d", len(spec), MaxScheduleBytes)
	case strings.IndexFunc(spec, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) >= 0:
		return nil, errors.New("is one line of printable text, fields separated by spaces")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		// The zone has one home, the timezone field; robfig/cron's own
		// prefix would also read the machine's zone database unchecked.
		return nil, errors.New("names its time zone in timezone, not with a TZ= prefix")
	}
	spec = strings.TrimSpace(spec)
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		// robfig/cron rounds a sub-second or negative delay up to a
		// second and drops fractions: refuse what it would not honour.
		d, err := time.ParseDuration(strings.TrimSpace(every))
		switch {
		case err != nil:
			return nil, errors.New("@every takes a duration such as 90s, 5m or 1h30m")
		case d < time.Second || d%time.Second != 0:
			return nil, errors.New("@every takes a whole number of seconds, at least 1s")
		}
		return cron.Every(d), nil
	}
	s, err := specParser.Parse(spec)
	if err != nil {
		return nil, errors.New("is not a cron schedule: 5 fields (minute hour day-of-month month day-of-week), 6 with a leading seconds field, or a descriptor such as @daily or @every 5m")
	}
	return s, nil
}

// zones caches loaded zones: a zone's rules do not change while the
// process runs, and recurrence.next runs inside a transaction.
var zones sync.Map // name → *time.Location

// loadZone loads an IANA zone. "Local" is refused: it would make a
// schedule mean something different on every machine.
func loadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	switch {
	case len(name) > MaxZoneBytes:
		return nil, fmt.Errorf("is %d bytes, over %d", len(name), MaxZoneBytes)
	case name == "Local" || name == "":
		return nil, errors.New("names an IANA time zone such as UTC or Europe/Paris, not the machine's")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errors.New("is not an IANA time zone such as UTC or Europe/Paris")
	}
	zones.Store(name, loc)
	return loc, nil
}

// Next is the job's first occurrence strictly after t, in UTC; zero when
// it has none within robfig/cron's five-year horizon. The schedule is read
// in the job's zone, so a daily 09:00 in Europe/Paris follows its summer
// time.
func (j Job) Next(t time.Time) time.Time {
	from := t
	// robfig/cron's arithmetic across a daylight-saving change can land on
	// or before the instant it started from; step past it rather than
	// hand the host a next that is not after the last.
	for range 4 {
		n := j.spec.Next(from.In(j.loc))
		if n.IsZero() {
			return time.Time{}
		}
		if n.After(t) {
			return n.UTC()
		}
		from = later(n, from).Add(time.Second)
	}
	return time.Time{}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
