package partition

import "github.com/leasehold/leasehold/internal/store"

// NotifyChannel returns the LISTEN/NOTIFY channel of the partition groups in
// schema ("" for the default): "leasehold_partitions_" and 16 hex digits of
// XXH64 of the schema name, short enough for any schema name. The payload
// of each notification is the group's name.
func NotifyChannel(schema string) string { return store.PartitionChannel(schema) }
