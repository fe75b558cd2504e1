// Package bucketing maps records to bucket paths.
//
// A bucket is a relative, slash-separated directory under the sink's base
// directory (or key prefix on an object store). The empty string is the base
// itself. An [Assigner] computes the bucket of one record; the file sink keeps
// one set of part files per bucket.
//
// # Assigners
//
//   - [BasePath]: every record goes to the base directory.
//   - [DateTime]: processing time, the clock value passed by the caller,
//     formatted with a Go time layout in a time zone (default
//     "2006-01-02--15" in UTC, as Flink's DateTimeBucketAssigner but with a
//     fixed zone instead of the system one). A '/' in the layout makes nested
//     directories.
//   - [EventTime]: the time is read from a JSON field of the record, so that a
//     replayed record always lands in the same bucket.
//   - [Field] and [Hive]: the value of one JSON field as the bucket, or
//     Hive-style "name=value/..." partitions.
//   - [Func]: a custom function.
//
// [Parse] builds an assigner from the spec strings of the command line.
//
// # Contract
//
// Every function of this package is pure: it does no I/O, reads no clock
// (the caller passes now), and keeps no package-level mutable state. An
// Assigner is immutable once built and safe for concurrent use by any number
// of goroutines. For the same record, now and configuration, Bucket always
// returns the same result.
//
// A nil error from Bucket guarantees that the returned path has been checked
// by [Sanitize]: it is "" or a clean relative path without ".." or empty
// components, without a component starting with '.' or '_' (those names are
// reserved for staging and state files), without control characters or
// backslashes, and within the length limits. This holds for [Func] too: no
// caller can skip the check.
//
// # JSON records
//
// The JSON assigners read only as much of the record as they need: they scan
// the top-level object, skip the values of the other members without decoding
// them, and stop at the field they want. The rest of the record is not
// validated. A field is named by its key, or by a dotted path "a.b.c" that
// descends into nested objects (a key that itself contains '.' cannot be
// named). If a key occurs more than once in an object, the first occurrence
// is used. String values are used with their JSON escapes decoded; invalid
// UTF-8 and lone surrogates become U+FFFD, as with encoding/json.
//
// # Errors
//
// All errors can be told apart with [errors.Is]:
//
//   - [source.ErrBadRecord]: this record cannot be bucketed (not a JSON object, the
//     field is missing, null, of the wrong type, or holds an unparseable time
//     or an unusable path). The error is a [*FieldError] naming the field and
//     the reason; the caller adds the record's origin (file and offset,
//     Kafka partition and offset). Other records are not affected.
//   - [ErrInvalidBucket]: a computed path failed [Sanitize]. The error is an
//     [*InvalidBucketError] with the path and the reason. When the path came
//     from a record's field, the error is also a source.ErrBadRecord.
//   - [ErrInvalidSpec]: the assigner is misconfigured (a bad spec for Parse,
//     or an invalid argument to a constructor, such as an empty field name).
//     Parse reports it at once; an assigner built directly by a constructor
//     returns it from every call to Bucket.
//
// Errors returned by a [Func] are passed on wrapped, so errors.Is still finds
// the function's own errors.
package bucketing
