// Package queuesql holds the SQL statements of package queue, with
// {{schema}} placeholders, in one place, so that the benchmarks' raw-SQL
// baseline runs exactly the statements the queue runs.
package queuesql
