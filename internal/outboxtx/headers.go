package outboxtx

import (
	"encoding/binary"
	"errors"
)

// EncodeHeaders encodes keys and values (parallel) as stored in
// outbox_records.headers: the count, then each key and value, each a
// uvarint length and its bytes. No headers encode as nil.
func EncodeHeaders(keys []string, values [][]byte) []byte {
	if len(keys) == 0 {
		return nil
	}
	b := binary.AppendUvarint(nil, uint64(len(keys)))
	for i, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(values[i])))
		b = append(b, values[i]...)
	}
	return b
}

// ErrBadHeaders is returned by DecodeHeaders for bytes EncodeHeaders did
// not write.
var ErrBadHeaders = errors.New("outbox: malformed stored headers")

// DecodeHeaders decodes what EncodeHeaders encoded, calling fn for each
// header in order.
func DecodeHeaders(b []byte, fn func(key string, value []byte)) error {
	if len(b) == 0 {
		return nil
	}
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return ErrBadHeaders
	}
	b = b[w:]
	for range n {
		var parts [2][]byte
		for j := range parts {
			l, w := binary.Uvarint(b)
			if w <= 0 || uint64(len(b)-w) < l {
				return ErrBadHeaders
			}
			parts[j], b = b[w:w+int(l)], b[w+int(l):]
		}
		fn(string(parts[0]), parts[1])
	}
	if len(b) != 0 {
		return ErrBadHeaders
	}
	return nil
}
