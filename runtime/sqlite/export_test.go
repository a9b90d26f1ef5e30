package sqlite

// Queries whose plans the tests check.
const (
	ScopeEventsQuery = qScopeEvents
	WorkEventsQuery  = qWorkEvents
	ChangesQuery     = qChanges
	ActiveWaitsQuery = qActiveWaits
)

// WorksQuery is the page query of a WorkFilter.
var WorksQuery = worksQuery

// Migrations is how many migrations this build has.
var Migrations = len(migrations)

// WriterPragma reads a pragma on the writer connection.
func WriterPragma(s *Store, name string) (string, error) {
	var v string
	err := s.writer.QueryRow(`PRAGMA ` + name).Scan(&v)
	return v, err
}

// PriorAttemptsQuery is PriorAttempts' query, whose plan a test checks.
const PriorAttemptsQuery = qPriorAttempts
