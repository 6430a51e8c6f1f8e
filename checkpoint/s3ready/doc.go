// Package s3ready holds what the S3 servers that tests and benchmarks start
// on loopback (checkpoint/versitygw, checkpoint/weed) share: a client with
// the server's static credentials and the readiness probe (a bucket, one
// object written and removed). It starts no process itself, and the
// product's own S3 store (checkpoint.S3) does not use it.
package s3ready
