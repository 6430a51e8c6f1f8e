// Package openapi holds edl's API description and serves it with the
// browsable UI. swag writes swagger.json and swagger.yaml (Swagger 2.0) from
// the annotations in api/; openapi/gen (package oas3) converts them to the
// served OpenAPI 3.0 openapi.json and openapi.yaml, declaring every error
// response as application/problem+json. `make openapi` does both.
//
// Never edit the generated files by hand: change the annotations and run
// make openapi; a test fails when the committed files are stale. This
// package must not import anything of edl's.
package openapi
