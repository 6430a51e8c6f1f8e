// Package s3ready holds what the S3 servers that tests and benchmarks start
// on loopback (checkpoint/versitygw, checkpoint/weed) share: a client with
// the server's static credentials, the readiness probe (a bucket, one
// object written and removed) and the wait for a started child to pass it
// (WaitChild). It starts no process itself, and the
// product's own S3 store (checkpoint.S3) does not use it.
package s3ready
