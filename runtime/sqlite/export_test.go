package sqlite

// Queries whose plans the tests check.
const (
	ScopeEventsQuery = qScopeEvents
	WorkEventsQuery  = qWorkEvents
)

// Migrations is how many migrations this build has.
var Migrations = len(migrations)
