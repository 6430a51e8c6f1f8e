// Command gen writes openapi/openapi.json and openapi.yaml (OpenAPI 3.0,
// served by the API) from openapi/swagger.json (Swagger 2.0, written by
// swag). `make openapi` runs it after swag.
package main
