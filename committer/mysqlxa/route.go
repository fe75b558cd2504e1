package mysqlxa

import (
	"hash/maphash"
	"slices"

	"github.com/filesink/filesink/internal/jsonscan"
)

// KeyPartitioner returns a function that sends every record with the same
// key to the same subtask: it hashes the JSON text of the record's fields
// named in key (the sink's key columns) and returns a subtask index in
// [0, n). Give it to pipeline.Config.Partition when a job runs more than one
// subtask in Upsert or Increment mode: rows of one key written by two
// subtasks' branches of the same checkpoint wait for each other's locks
// until the lock wait times out, because neither branch commits before
// both have prepared.
//
// Keys compare by their JSON text: {"k":1} and {"k":1.0} may go to
// different subtasks. A record that is not a JSON object, or lacks a key
// field, goes to subtask 0, whose sink reports it. The function is safe
// for concurrent use.
func KeyPartitioner(key []string) func(record []byte, n int) int {
	key = slices.Clone(key)
	seed := maphash.MakeSeed()
	return func(record []byte, n int) int {
		if n <= 1 || jsonscan.ObjectCheck(record) != nil {
			return 0
		}
		var h maphash.Hash
		h.SetSeed(seed)
		found := 0
		for _, k := range key {
			objectFields(record, func(name, val []byte) {
				if string(keyBytes(name)) == k {
					h.Write(val)
					h.WriteByte(0)
					found++
				}
			})
		}
		if found != len(key) {
			return 0
		}
		return int(h.Sum64() % uint64(n))
	}
}
