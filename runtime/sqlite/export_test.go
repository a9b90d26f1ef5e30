package sqlite

import "context"

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
	conn, err := s.lockWriter(context.Background())
	if err != nil {
		return "", err
	}
	defer s.unlockWriter()
	var v string
	err = conn.QueryRowContext(context.Background(), `PRAGMA `+name).Scan(&v)
	return v, err
}

// PriorAttemptsQuery is PriorAttempts' query, whose plan a test checks.
const PriorAttemptsQuery = qPriorAttempts
