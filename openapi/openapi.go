package openapi

import (
	_ "embed"

	"github.com/labstack/echo/v4"
	echoSwagger "github.com/swaggo/echo-swagger"
)

// The served spec is OpenAPI 3.0 (openapi.json, .yaml), which `make
// openapi` makes from swag's Swagger 2.0 output (swagger.json) with
// openapi/gen; 3.0 can say that errors are application/problem+json.

//go:embed openapi.json
var specJSON []byte

//go:embed openapi.yaml
var specYAML []byte

// JSON is the OpenAPI 3.0 spec as JSON.
func JSON() []byte { return specJSON }

// YAML is the OpenAPI 3.0 spec as YAML.
func YAML() []byte { return specYAML }

// UI serves the Swagger UI (mount it at /docs/*) reading specURL.
func UI(specURL string) echo.HandlerFunc {
	return echoSwagger.EchoWrapHandler(echoSwagger.URL(specURL), echoSwagger.DeepLinking(true))
}
