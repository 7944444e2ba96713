package history

import "database/sql"

// DBOf is the database of s, for the benchmarks' bulk writes.
func DBOf(s *Store) *sql.DB { return s.db }

// UnixOrNil is unixOrNil, for the benchmarks' bulk writes.
var UnixOrNil = unixOrNil
