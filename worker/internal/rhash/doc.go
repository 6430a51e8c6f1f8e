// Package rhash reads one of the workers' Redis hashes (coord's members
// and failure reports, datapipe's debug records) into a typed map,
// keeping the fields whose values parse: a malformed record is skipped,
// not an error.
package rhash
