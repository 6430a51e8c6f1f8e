// Package pubsub is the one loop that reads a Redis subscription: every
// message's payload to a function, until the context ends or the
// subscription closes. It owns no channel names and decides nothing.
package pubsub
