// Package versitygw runs the Versity S3 Gateway (versitygw, Apache 2.0) with
// its posix backend as a child process that serves S3 on a free loopback
// port, with one root identity and its data in a directory, for tests.
//
// Buckets are directories, objects are files, multipart uploads are staged
// under the bucket and assembled on completion; metadata (content type,
// ETags, upload state) lives in a sidecar directory beside the data, so the
// data directory needs no extended attributes.
//
// It owns only the child process: starting it, waiting until it stores an
// object, stopping, killing and restarting it on the same port and data.
// It must not be used as a production object store manager.
package versitygw
