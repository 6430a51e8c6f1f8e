// Package checkpoint owns a training job's checkpoints in object storage.
//
// It has two layers. A Store is a flat key space of immutable objects with
// streamed Put and Get, List by prefix and Delete; Open gives one for a
// file://DIR or s3://BUCKET/PREFIX URL (minio-go). A Catalog keeps one job's
// checkpoints in a Store: shards (opaque named blobs: parameters, optimizer
// state, data-pipeline position, trainer metadata) are written first and the
// manifest, which lists every shard's size and SHA-256, last, so a checkpoint
// exists exactly when its manifest does. Restore takes the newest checkpoint
// whose shards all verify and reports each one it had to skip. An Uploader
// takes an in-memory snapshot at a step boundary and writes it in the
// background, refusing a new one while the last is in flight and retrying
// with backoff while the store is down.
//
// Object layout under the store's root, for job J:
//
//	J/manifests/<step, 20 digits>.json       the commit record
//	J/shards/<step, 20 digits>-<nonce>/<name> the shards of one attempt
//
// What it must not do: import any other edl package (the worker and the API
// wire it in), read flags or the environment (cmd/edl passes Options; see
// OptionsFromEnv), or interpret shard contents.
package checkpoint
