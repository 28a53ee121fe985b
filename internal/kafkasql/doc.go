// Package kafkasql holds the SQL statements of package queue/kafka, with
// {{schema}} placeholders, in one place, so that the benchmarks' raw-SQL
// baseline runs exactly the statements the consumer runs.
package kafkasql
