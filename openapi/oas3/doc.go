// Package oas3 turns the Swagger 2.0 document that swag writes from the
// handlers' annotations into the OpenAPI 3.0 document edl serves, and adds
// what 2.0 cannot say: every error response is application/problem+json
// (RFC 9457). `make openapi` runs it (openapi/gen); the server embeds only
// its output, so this package and kin-openapi stay out of the binary.
package oas3
