package openapi

import (
	_ "embed"

	"github.com/labstack/echo/v4"
	echoSwagger "github.com/swaggo/echo-swagger"
)

//go:embed swagger.json
var specJSON []byte

//go:embed swagger.yaml
var specYAML []byte

// JSON is the spec as JSON.
func JSON() []byte { return specJSON }

// YAML is the spec as YAML.
func YAML() []byte { return specYAML }

// UI serves the Swagger UI (mount it at /docs/*) reading specURL.
func UI(specURL string) echo.HandlerFunc {
	return echoSwagger.EchoWrapHandler(echoSwagger.URL(specURL), echoSwagger.DeepLinking(true))
}
