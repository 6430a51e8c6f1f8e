package api

import (
	"net/http"

	"github.com/edl-nomad/edl/openapi"
	"github.com/labstack/echo/v4"
)

// openapiJSON godoc
//
//	@Summary	This API's OpenAPI description, as JSON
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	object
//	@Router		/openapi.json [get]
func (s *Server) openapiJSON(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapi.JSON())
}

// openapiYAML godoc
//
//	@Summary	This API's OpenAPI description, as YAML
//	@Tags		operations
//	@Produce	application/yaml
//	@Success	200	{object}	object
//	@Router		/openapi.yaml [get]
func (s *Server) openapiYAML(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", openapi.YAML())
}

// docsRedirect godoc
//
//	@Summary	The browsable API documentation (redirects to /docs/index.html)
//	@Tags		operations
//	@Success	301
//	@Router		/docs [get]
func (s *Server) docsRedirect(c echo.Context) error {
	return c.Redirect(http.StatusMovedPermanently, "/docs/index.html")
}

// docsUI serves the Swagger UI under /docs/.
func (s *Server) docsUI() echo.HandlerFunc { return openapi.UI("/openapi.json") }
